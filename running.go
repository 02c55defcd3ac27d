package herd

// The partitions a member runs a handler for, as Owned, Session and
// Leave's timeout error report them.

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"
)

// runningSet is what the reconcile loop and the handlers' goroutines
// report of the partitions being run, under mu: the public accessors
// (Owned, Session) read it from any goroutine.
type runningSet struct {
	mu    sync.Mutex
	owned map[string]uint64 // partitions with a running handler -> epoch
	// handlers counts, per partition, the handler goroutines that have not
	// returned, including those cancelled for a handoff or a loss (which
	// owned no longer lists); Leave's timeout error names them.
	handlers map[string]int
	sess     string // current session id, "" if none
	// live is the last session opened, for SessionLive (read without mu).
	live atomic.Pointer[session]
}

// handlersRunning lists, sorted, the partitions whose handlers have not
// returned, including those being handed off, which Owned leaves out (and
// Leave hands off all of them).
func (m *Member) handlersRunning() []string {
	m.running.mu.Lock()
	defer m.running.mu.Unlock()
	return slices.Sorted(maps.Keys(m.running.handlers))
}

// ownedCount is len(Owned()).
func (m *Member) ownedCount() int {
	m.running.mu.Lock()
	defer m.running.mu.Unlock()
	return len(m.running.owned)
}

// handlerStarted and handlerReturned keep m.running.handlers: the
// partitions whose handler goroutines have not returned, whether they
// still own them or are being handed off or dropped.
func (m *Member) handlerStarted(p string) {
	m.running.mu.Lock()
	defer m.running.mu.Unlock()
	if m.running.handlers == nil {
		m.running.handlers = map[string]int{}
	}
	m.running.handlers[p]++
}

func (m *Member) handlerReturned(p string) {
	m.running.mu.Lock()
	defer m.running.mu.Unlock()
	if m.running.handlers[p]--; m.running.handlers[p] <= 0 {
		delete(m.running.handlers, p)
	}
}
