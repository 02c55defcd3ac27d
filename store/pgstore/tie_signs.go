package pgstore

import (
	"sync/atomic"
	"time"
)

// signs is what a member heard on its tied connection: the last time
// (monotonic, from start), and how many heartbeats.
type signs struct {
	start time.Time
	last  atomic.Int64 // ns since start
	beats atomic.Int64 // heartbeats (notices) heard
}

func newSigns() *signs { return &signs{start: time.Now()} }

// heard records a sign of life: a statement's start, or its answer.
func (g *signs) heard() { g.last.Store(int64(time.Since(g.start))) }

// beat records a heartbeat of watch (a notice).
func (g *signs) beat() {
	g.heard()
	g.beats.Add(1)
}

// quiet is the time since the last sign of life.
func (g *signs) quiet() time.Duration {
	return time.Since(g.start) - time.Duration(g.last.Load())
}
