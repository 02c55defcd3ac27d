package herd

import (
	"context"
	"sync"
)

// Gate pauses a member as if its process had been stopped (SIGSTOP): while
// the gate is paused, the member's goroutines (renewal, reconciliation,
// the reader of the log, Claim.Checkpoint) block at their next step; timers keep
// running, so on Resume they all see the time that passed, as a resumed
// process does. It exists for tests and simulations. The zero value is open.
type Gate struct {
	mu     sync.Mutex
	closed chan struct{} // non-nil while paused; closed on Resume
}

// Pause closes the gate.
func (g *Gate) Pause() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed == nil {
		g.closed = make(chan struct{})
	}
}

// Resume opens the gate and wakes everything that waits on it.
func (g *Gate) Resume() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed != nil {
		close(g.closed)
		g.closed = nil
	}
}

// Paused reports whether the gate is closed.
func (g *Gate) Paused() bool {
	if g == nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.closed != nil
}

// wait blocks while the gate is paused, or until ctx is done. A nil gate
// never blocks.
func (g *Gate) wait(ctx context.Context) error {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	ch := g.closed
	g.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
