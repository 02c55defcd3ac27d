package herd

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"
)

// runningSet is what the reconcile loop and the handlers' goroutines report
// of the partitions being run and the session, for Owned, Session and Leave.
type runningSet struct {
	mu    sync.Mutex
	owned map[string]uint64 // partitions with a running handler -> epoch
	// handlers counts, per partition, the handler goroutines that have not
	// returned, those cancelled for a handoff or a loss included.
	handlers map[string]int
	live     atomic.Pointer[session] // the open session, nil between sessions (read without mu)
}

// dropOwned forgets every owned partition, as their handlers are cancelled.
func (r *runningSet) dropOwned() {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.owned)
}

// handlersRunning lists, sorted, the partitions whose handlers have not
// returned, those being handed off included.
func (m *Member) handlersRunning() []string {
	m.running.mu.Lock()
	defer m.running.mu.Unlock()
	return slices.Sorted(maps.Keys(m.running.handlers))
}

func (m *Member) ownedCount() int {
	m.running.mu.Lock()
	defer m.running.mu.Unlock()
	return len(m.running.owned)
}

// handlerReturned counts out a handler that start counted in.
func (m *Member) handlerReturned(p string) {
	m.running.mu.Lock()
	defer m.running.mu.Unlock()
	if m.running.handlers[p]--; m.running.handlers[p] <= 0 {
		delete(m.running.handlers, p)
	}
}
