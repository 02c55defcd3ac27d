package herd

// The CPU-heavy steps of the members of one process take turns.

import (
	"context"
	"runtime"
	"slices"
	"sync"

	"github.com/herdhq/herd/store"
)

// heavy bounds how many of the CPU-heavy steps of the members of this
// process run at once (a full plan, applying the log's entries to the copy
// of the group, copying a new read of it): at most as many as Go runs
// goroutines at once. A member alone in its process never waits for it.
// Many members in one process (a test, herd bench's 100 on two cores)
// would otherwise each have a step of tens of milliseconds runnable at
// once, and every other goroutine of the process, a session's renewal among
// them, would wait for a turn behind them all: in herd bench --scenario
// large a goroutine waited 0.4 s for one in ten of its turns and up to 2.7 s,
// renewals timed out and sessions were lost. Waiting for a token instead,
// the steps leave the scheduler's queue short; they take the same CPU.
//
// A member still to receive partitions (one that joined and has not planned
// yet, or whose plan left partitions to come from others) is served before
// the others: the group is not balanced until it has them, and its steps
// are few. In herd bench --scenario large, ten members joining a hundred
// each waited 0.2-0.5 s for a turn to take in their read of the group, and
// as long again to apply the log's first entries after it, behind the
// hundred others' plans and entries.
var heavy = newTurns(max(1, runtime.GOMAXPROCS(0)))

// heavyEntries is the least number of log entries whose handling (checked
// against the aim, applied to the copy) is a heavy step.
const heavyEntries = store.MaxBatch

// turns hands out turns at heavy steps: as many at once as its capacity,
// in the order they were asked for, those asked for first (take's first)
// before the others.
type turns struct {
	mu    sync.Mutex
	cap   int
	held  int
	queue [2][]chan struct{} // waiters: [0] first, [1] the others
}

func newTurns(n int) *turns { return &turns{cap: n} }

// take waits for a turn; it reports false, without one, if ctx ended
// first. The caller gives the turn back with done.
func (t *turns) take(ctx context.Context, first bool) bool {
	t.mu.Lock()
	if t.held < t.cap {
		t.held++
		t.mu.Unlock()
		return true
	}
	ch := make(chan struct{})
	q := 1
	if first {
		q = 0
	}
	t.queue[q] = append(t.queue[q], ch)
	t.mu.Unlock()
	select {
	case <-ch:
		return true
	case <-ctx.Done():
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if i := slices.Index(t.queue[q], ch); i >= 0 {
		t.queue[q] = slices.Delete(t.queue[q], i, i+1)
		return false
	}
	// The turn was handed over as ctx ended: pass it on.
	t.handOver()
	return false
}

// tryTake takes a turn if one is free, without waiting.
func (t *turns) tryTake() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.held < t.cap {
		t.held++
		return true
	}
	return false
}

// done gives back a turn take or tryTake gave.
func (t *turns) done() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.handOver()
}

// handOver gives a turn given back to the next waiter, or frees it.
// t.mu is held.
func (t *turns) handOver() {
	for q := range t.queue {
		if len(t.queue[q]) > 0 {
			ch := t.queue[q][0]
			t.queue[q] = slices.Delete(t.queue[q], 0, 1)
			close(ch)
			return
		}
	}
	t.held--
}

// inUse is how many turns are held.
func (t *turns) inUse() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.held
}
