// Package pause is the pause hook of a member: the gate that package
// herdtest hands to users, that herd and jobs keep in unexported fields of
// their configs, and the bridge through which herdtest sets those fields.
package pause

import (
	"context"
	"sync"
)

// Gate pauses a member as if its process had been stopped (SIGSTOP): while
// it is paused, the member's goroutines block at their next step (Wait).
// The zero value is open.
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

// Paused reports whether the gate is closed. A nil gate never is.
func (g *Gate) Paused() bool {
	if g == nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.closed != nil
}

// Wait blocks while the gate is paused, or until ctx is done. A nil gate
// never blocks.
func (g *Gate) Wait(ctx context.Context) error {
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

// The setters of the configs' unexported gate fields, registered by herd
// and jobs when they are initialized: this package cannot name their
// types (they import it), so each is kept as an any holding a
// func(*herd.Config, *Gate) and a func(*jobs.Config, *Gate), which
// herdtest (importing both, so initialized after them) asserts.
var (
	SetHerdGate any
	SetJobsGate any
)
