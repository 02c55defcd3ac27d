package faultstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/herdhq/herd/store"
)

// Server models the one store server that every connection of a fleet
// shares, as one Redis process serves all members on one core: each call
// costs it a service time (Cost), and calls are served one at a time, in
// the order they arrive. A call's reply comes when the server has served
// it, after the calls before it: under load, calls queue. The change a call
// makes takes effect when it arrives (the inner store is called first) and
// its reply is held for the queue and its service time; a blocked Changes
// costs nothing while it waits, only the entries it returns.
//
// Wrap each connection with WithServer(sv) (several Stores, one Server).
// Waits are timers selected against the call's context, so the model runs
// in real and in testing/synctest virtual time alike.
type Server struct {
	cost Cost

	mu        sync.Mutex
	busyUntil time.Time
	busy      time.Duration // service time charged so far
}

// Cost is the service time of the server's operations: a call, then each
// row it reads or writes.
type Cost struct {
	Call       time.Duration // every call (a script, a transaction, a read of the log)
	KeepAlive  time.Duration // a renewal (a script that also expires due sessions)
	Checkpoint time.Duration // a checkpoint write
	Write      time.Duration // each record a claim, release or restore writes
	Partition  time.Duration // each partition a snapshot reads
	Record     time.Duration // each ownership record a snapshot reads
	Entry      time.Duration // each log entry Changes returns
	RecordRead time.Duration // each record Records reads (with its checkpoint)
}

// RedisCost is the service time of Redis 7.0.15 on one core of a 2-core
// AMD EPYC (loopback), measured on 2026-11-25 with INFO commandstats (the
// time the server spends executing each command; a script's commands are
// inside its EVALSHA) by BenchmarkServerCost and BenchmarkSnapshot100k in
// store/redisstore, medians of three runs:
//
//	go test -run '^$' -bench 'ServerCost|Snapshot100k' -benchtime 20x ./store/redisstore/
//
// KeepAlive 23-48 µs, Checkpoint 17.5-26 µs, ClaimBatch 10.8-11.8 µs and
// ReleaseBatch 11.2-12.5 µs per partition (batches of 1,000), Records 0.88-1.03
// µs per record, Changes 35-44 µs per call of 1,000 changes, a Snapshot
// 1.4-2.9 ns per partition (the set is one string, partlist) and 0.44-0.46
// µs per record. Execution time is
// close to the server's CPU time: used_cpu_sys + used_cpu_user over whole
// rebalances of member processes was 0.74-1.09 times the commands' time (less under
// contention, when execution time includes time the server waited for a
// core), so no factor is applied.
var RedisCost = Cost{
	Call:       20 * time.Microsecond,
	KeepAlive:  30 * time.Microsecond,
	Checkpoint: 18 * time.Microsecond,
	Write:      11 * time.Microsecond,
	Partition:  2 * time.Nanosecond,
	Record:     450 * time.Nanosecond,
	Entry:      40 * time.Nanosecond,
	RecordRead: 900 * time.Nanosecond,
}

// String describes c in one line.
func (c Cost) String() string {
	if c == (Cost{}) {
		return "free"
	}
	return fmt.Sprintf("call %v, renewal %v, checkpoint %v, per write %v, per row read %v-%v, per log entry %v",
		c.Call, c.KeepAlive, c.Checkpoint, c.Write, c.Partition, c.Record, c.Entry)
}

// NewServer returns a server with the given service times.
func NewServer(c Cost) *Server { return &Server{cost: c} }

// Busy is the service time the server has spent so far.
func (sv *Server) Busy() time.Duration {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	return sv.busy
}

// serve queues a call that costs d and waits until the server has served
// it, or ctx ends.
func (sv *Server) serve(ctx context.Context, op string, d time.Duration) error {
	if sv == nil || d <= 0 {
		return nil
	}
	sv.mu.Lock()
	now := time.Now()
	start := sv.busyUntil
	if start.Before(now) {
		start = now
	}
	sv.busyUntil = start.Add(d)
	sv.busy += d
	wait := sv.busyUntil.Sub(now)
	sv.mu.Unlock()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("faultstore: %s: waiting for the server: %w", op, ctx.Err())
	}
}

// WithServer makes the Store's calls queue on sv (see Server).
func WithServer(sv *Server) Option {
	return func(s *Store) { s.server = sv }
}

// charge makes the call wait for the server (WithServer), which serves it
// in cost(its service times); without a server it returns at once.
func (s *Store) charge(ctx context.Context, op string, cost func(Cost) time.Duration) error {
	if s.server == nil {
		return nil
	}
	return s.server.serve(ctx, op, cost(s.server.cost))
}

// snapshotCost is what a Snapshot of snap costs the server (nil: a call).
func snapshotCost(c Cost, snap *store.Snapshot) time.Duration {
	d := c.Call
	if snap != nil {
		d += c.Partition*time.Duration(len(snap.Sessions)+len(snap.Partitions)) + c.Record*time.Duration(len(snap.Owners))
	}
	return d
}
