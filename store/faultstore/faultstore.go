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
// and decide its fate. A non-nil error means the call fails now; a nil
// ctx fails it before it is counted (it would panic below).
func (s *Store) enter(ctx context.Context, op string, counter *atomic.Int64) (fate, error) {
	if ctx == nil {
		return failBefore, fmt.Errorf("faultstore: %s: nil context (pass context.Background() or a call's own): %w", op, store.ErrInvalid)
	}
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

// Close does not close the inner store, which is usually shared; its owner
// closes it.
func (s *Store) Close() error { return nil }
