package sqlitestore

import (
	"slices"
	"sync"
)

// gate admits one write transaction of a Store at a time, first come first
// served, except that session renewals go before every other waiting
// write. A member that checkpoints many partitions queues many writes;
// its renewal, if it waited behind them all on a busy file, would pass
// its deadline and the member would fence itself with nothing wrong.
// Renewals are few (one per session every third of its TTL or so), so
// the others do not starve.
type gate struct {
	mu     sync.Mutex
	held   bool
	urgent []chan struct{} // waiting renewals, in arrival order
	normal []chan struct{} // every other waiting write
}

// enter takes the gate, waiting until it is free or until done or closed
// is closed (the caller's context ended, the store closed); it reports
// whether it took it. A waiter is handed the gate by closing its channel,
// with held left true.
func (g *gate) enter(urgent bool, done, closed <-chan struct{}) bool {
	g.mu.Lock()
	if !g.held {
		g.held = true
		g.mu.Unlock()
		return true
	}
	ready := make(chan struct{})
	q := &g.normal
	if urgent {
		q = &g.urgent
	}
	*q = append(*q, ready)
	g.mu.Unlock()

	select {
	case <-ready:
		return true
	case <-done:
	case <-closed:
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-ready: // handed over as the wait ended: pass it on
		g.passLocked()
	default:
		if i := slices.Index(*q, ready); i >= 0 {
			*q = slices.Delete(*q, i, i+1)
		}
	}
	return false
}

// leave releases the gate to the next waiter, if any.
func (g *gate) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.passLocked()
}

func (g *gate) passLocked() {
	for _, q := range []*[]chan struct{}{&g.urgent, &g.normal} {
		if len(*q) > 0 {
			ready := (*q)[0]
			(*q)[0] = nil
			*q = (*q)[1:]
			close(ready)
			return
		}
	}
	g.held = false
}
