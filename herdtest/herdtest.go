// Package herdtest holds herd's test hooks: a Gate that pauses a member as
// if its process had been stopped, to simulate stalls of a fleet's members
// and of their handlers in tests and simulations.
package herdtest

import (
	"github.com/herdhq/herd"
	"github.com/herdhq/herd/internal/pause"
	"github.com/herdhq/herd/jobs"
)

// Gate pauses a member as if its process had been stopped (SIGSTOP): while
// the gate is paused, the member's goroutines (renewal, reconciliation,
// the reader of the log, Claim.Checkpoint) block at their next step; timers
// keep running, so on Resume they all see the time that passed, as a
// resumed process does. The zero value is open. Give it to a member with
// WithGate or WithJobsGate.
type Gate struct {
	g pause.Gate
}

// Pause closes the gate.
func (g *Gate) Pause() { g.g.Pause() }

// Resume opens the gate and wakes everything that waits on it.
func (g *Gate) Resume() { g.g.Resume() }

// Paused reports whether the gate is closed. A nil gate never is.
func (g *Gate) Paused() bool { return g != nil && g.g.Paused() }

// WithGate makes the member that joins with cfg pause while g is paused. A
// nil g removes the gate.
func WithGate(cfg *herd.Config, g *Gate) {
	if cfg != nil {
		pause.SetHerdGate.(func(*herd.Config, *pause.Gate))(cfg, g.inner())
	}
}

// WithJobsGate makes the jobs member that starts with cfg pause while g is
// paused. A nil g removes the gate.
func WithJobsGate(cfg *jobs.Config, g *Gate) {
	if cfg != nil {
		pause.SetJobsGate.(func(*jobs.Config, *pause.Gate))(cfg, g.inner())
	}
}

func (g *Gate) inner() *pause.Gate {
	if g == nil {
		return nil
	}
	return &g.g
}
