package herd

// The CPU-heavy steps of the members of one process take turns.

import (
	"context"
	"runtime"

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
var heavy = make(turns, max(1, runtime.GOMAXPROCS(0)))

// heavyEntries is the least number of log entries whose handling (checked
// against the aim, applied to the copy) is a heavy step.
const heavyEntries = store.MaxBatch

// turns hands out turns at heavy steps: as many at once as its capacity.
type turns chan struct{}

// take waits for a turn; it reports false, without one, if ctx ended
// first. The caller gives the turn back with done.
func (t turns) take(ctx context.Context) bool {
	if t.tryTake() {
		return true
	}
	select {
	case t <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

// tryTake takes a turn if one is free, without waiting.
func (t turns) tryTake() bool {
	select {
	case t <- struct{}{}:
		return true
	default:
		return false
	}
}

// done gives back a turn take gave.
func (t turns) done() { <-t }
