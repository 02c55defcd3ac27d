// Package faultstore wraps a store.Store to inject faults in tests and
// simulations: a cut connection, latency, and random failures (some before
// the call reaches the store, some after: a lost reply). It counts the calls
// it gets, reads and writes apart.
//
// A simulation typically wraps one shared store once per member, so that a
// member's connection can be cut or slowed alone; that is why Close does not
// close the inner store.
//
// Every wait (latency) is a timer selected against the call's ctx, so the
// wrapper works in real time and in testing/synctest virtual time alike. It
// starts no goroutine.
package faultstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herdhq/herd/store"
)

// Option configures a Store.
type Option func(*Store)

// WithSeed seeds the random source that decides which calls fail (default
// seed 1, so runs are repeatable as far as the order of calls is).
func WithSeed(seed uint64) Option {
	return func(s *Store) { s.rng = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)) }
}

// Counts are the calls a Store received, including those it failed.
type Counts struct {
	Reads  int64 // Snapshot and Records calls
	Feeds  int64 // Changes calls
	Writes int64 // every other call except Close
	Failed int64 // calls failed by the wrapper (cut or random failure)
	// Checkpoints is the Checkpoint calls, counted in Writes too.
	Checkpoints int64
	// Rows is the records the calls returned that read the group:
	// sessions, partitions, ownership and malformed records of each
	// Snapshot, and entries of each Changes.
	Rows int64
}

// Store is a fault-injecting store.Store. Its controls are safe for
// concurrent use and take effect on the next call.
type Store struct {
	inner store.Store

	reads, feeds, writes, failed atomic.Int64
	rows, checkpoints            atomic.Int64

	mu       sync.Mutex
	cut      bool
	cutGen   uint64        // incremented when a cut starts
	cutCh    chan struct{} // closed and replaced when the cut state changes
	latency  time.Duration
	failRate float64
	rng      *rand.Rand

	server *Server // WithServer; nil: calls cost no server time
}

var _ store.Store = (*Store)(nil)

// Wrap returns a Store that passes calls to inner, with no fault injected
// until one is set.
func Wrap(inner store.Store, opts ...Option) *Store {
	s := &Store{inner: inner, cutCh: make(chan struct{})}
	WithSeed(1)(s)
	for _, o := range opts {
		o(s)
	}
	return s
}

// SetCut cuts the connection (true) or restores it (false). While cut,
// every call fails with an error wrapping store.ErrUnavailable without
// reaching the inner store (after the latency, if any: a cut with latency
// models a call that times out).
func (s *Store) SetCut(cut bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cut == cut {
		return
	}
	s.cut = cut
	if cut {
		s.cutGen++
	}
	close(s.cutCh)
	s.cutCh = make(chan struct{})
}

// SetLatency makes every call wait d before it does anything else (0: none).
func (s *Store) SetLatency(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latency = d
}

// SetFailureRate makes a fraction p (0 to 1) of the calls fail with
// store.ErrUnavailable. Half of the failures happen before the call reaches
// the inner store; the other half after it did (its effect stays, its reply
// is lost), as when a connection drops while the reply is on its way.
func (s *Store) SetFailureRate(p float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failRate = min(max(p, 0), 1)
}

// Ops returns the calls counted so far.
func (s *Store) Ops() Counts {
	return Counts{Reads: s.reads.Load(), Feeds: s.feeds.Load(), Writes: s.writes.Load(), Failed: s.failed.Load(), Rows: s.rows.Load(),
		Checkpoints: s.checkpoints.Load()}
}

// fate is what happens to one call.
type fate int

const (
	pass       fate = iota
	failBefore      // fail without reaching the inner store
	failAfter       // reach the inner store, then lose the reply
)

// enter runs the common part of every call: count it, wait the latency,
// and decide its fate. A non-nil error means the call fails now.
func (s *Store) enter(ctx context.Context, op string, counter *atomic.Int64) (fate, error) {
	if counter != nil {
		counter.Add(1)
	}
	s.mu.Lock()
	latency := s.latency
	s.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return pass, fmt.Errorf("faultstore: %s: %w", op, err)
	}
	if latency > 0 {
		t := time.NewTimer(latency)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return pass, fmt.Errorf("faultstore: %s: %w", op, ctx.Err())
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cut {
		s.failed.Add(1)
		return failBefore, fmt.Errorf("faultstore: %s: connection cut: %w", op, store.ErrUnavailable)
	}
	if s.failRate > 0 && s.rng.Float64() < s.failRate {
		s.failed.Add(1)
		if s.rng.IntN(2) == 0 {
			return failBefore, fmt.Errorf("faultstore: %s: injected failure before the store: %w", op, store.ErrUnavailable)
		}
		return failAfter, nil
	}
	return pass, nil
}

func lostReply(op string) error {
	return fmt.Errorf("faultstore: %s: injected failure, reply lost: %w", op, store.ErrUnavailable)
}

// OpenSession implements store.Store.
func (s *Store) OpenSession(ctx context.Context, group, member string, weight int, ttl time.Duration) (string, error) {
	f, err := s.enter(ctx, "open session", &s.writes)
	if err != nil {
		return "", err
	}
	id, err := s.inner.OpenSession(ctx, group, member, weight, ttl)
	if err := s.charge(ctx, "open session", func(c Cost) time.Duration { return c.Call + c.Write }); err != nil {
		return "", err
	}
	if f == failAfter {
		return "", lostReply("open session")
	}
	return id, err
}

// KeepAlive implements store.Store.
func (s *Store) KeepAlive(ctx context.Context, group, session string, ttl time.Duration) (time.Duration, error) {
	f, err := s.enter(ctx, "keep alive", &s.writes)
	if err != nil {
		return 0, err
	}
	next, err := s.inner.KeepAlive(ctx, group, session, ttl)
	if err := s.charge(ctx, "keep alive", func(c Cost) time.Duration { return c.KeepAlive }); err != nil {
		return 0, err
	}
	if f == failAfter {
		return 0, lostReply("keep alive")
	}
	return next, err
}

// CloseSession implements store.Store.
func (s *Store) CloseSession(ctx context.Context, group, session string) error {
	f, err := s.enter(ctx, "close session", &s.writes)
	if err != nil {
		return err
	}
	err = s.inner.CloseSession(ctx, group, session)
	if err := s.charge(ctx, "close session", func(c Cost) time.Duration { return c.Call + c.Write }); err != nil {
		return err
	}
	if f == failAfter {
		return lostReply("close session")
	}
	return err
}

// SetPartitions implements store.Store. A set equal to the stored one is
// charged as one call: the store compares digests, not sets.
func (s *Store) SetPartitions(ctx context.Context, group string, ps store.PartitionSet) (store.SetResult, error) {
	f, err := s.enter(ctx, "set partitions", &s.writes)
	if err != nil {
		return store.SetResult{}, err
	}
	res, err := s.inner.SetPartitions(ctx, group, ps)
	n := 0
	if res.Written {
		n = len(ps.Partitions)
	}
	if err := s.charge(ctx, "set partitions", func(c Cost) time.Duration { return c.Call + c.Partition*time.Duration(n) }); err != nil {
		return store.SetResult{}, err
	}
	if f == failAfter {
		return store.SetResult{}, lostReply("set partitions")
	}
	return res, err
}

// Snapshot implements store.Store.
func (s *Store) Snapshot(ctx context.Context, group string) (*store.Snapshot, error) {
	f, err := s.enter(ctx, "snapshot", &s.reads)
	if err != nil {
		return nil, err
	}
	snap, err := s.inner.Snapshot(ctx, group)
	if snap != nil {
		s.rows.Add(int64(len(snap.Sessions) + len(snap.Partitions) + len(snap.Owners) + len(snap.Malformed)))
	}
	if err := s.charge(ctx, "snapshot", func(c Cost) time.Duration { return snapshotCost(c, snap) }); err != nil {
		return nil, err
	}
	if f == failAfter {
		return nil, lostReply("snapshot")
	}
	return snap, err
}

// GiveBack implements store.Store.
func (s *Store) GiveBack(ctx context.Context, group, partition, session string, epoch uint64) error {
	f, err := s.enter(ctx, "give back", &s.writes)
	if err != nil {
		return err
	}
	err = s.inner.GiveBack(ctx, group, partition, session, epoch)
	if err := s.charge(ctx, "give back", func(c Cost) time.Duration { return c.Call + c.Write }); err != nil {
		return err
	}
	if f == failAfter {
		return lostReply("give back")
	}
	return err
}

// Checkpoint implements store.Store.
func (s *Store) Checkpoint(ctx context.Context, group, partition string, epoch uint64, value []byte) error {
	s.checkpoints.Add(1)
	f, err := s.enter(ctx, "checkpoint", &s.writes)
	if err != nil {
		return err
	}
	err = s.inner.Checkpoint(ctx, group, partition, epoch, value)
	if err := s.charge(ctx, "checkpoint", func(c Cost) time.Duration { return c.Checkpoint }); err != nil {
		return err
	}
	if f == failAfter {
		return lostReply("checkpoint")
	}
	return err
}

// Restore implements store.Store.
func (s *Store) Restore(ctx context.Context, group, partition string, epoch uint64, value []byte) error {
	f, err := s.enter(ctx, "restore", &s.writes)
	if err != nil {
		return err
	}
	err = s.inner.Restore(ctx, group, partition, epoch, value)
	if err := s.charge(ctx, "restore", func(c Cost) time.Duration { return c.Call + c.Write }); err != nil {
		return err
	}
	if f == failAfter {
		return lostReply("restore")
	}
	return err
}

// Close does not close the inner store, which is usually shared; its owner
// closes it.
func (s *Store) Close() error { return nil }
