package herd

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/herdhq/herd/internal/membermetrics"
	"github.com/herdhq/herd/store"
)

// registerMetrics registers the member's metrics (internal/membermetrics)
// with Config.Metrics, if set, and counts its store calls from then on.
func (m *Member) registerMetrics() error {
	if m.cfg.Metrics == nil {
		return nil
	}
	mm := membermetrics.New(m.cfg.Group, m.cfg.Member, ErrFenced, membermetrics.Gauges{
		Owned: func() float64 { return float64(m.ownedCount()) },
		Handlers: func() float64 {
			m.running.mu.Lock()
			defer m.running.mu.Unlock()
			return float64(len(m.running.handlers))
		},
		Live: func() float64 {
			if m.SessionLive() {
				return 1
			}
			return 0
		},
		Load: func() float64 {
			if m.meter == nil {
				return 0
			}
			return m.meter.Total()
		},
	})
	if err := mm.Register(m.cfg.Metrics); err != nil {
		if are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); ok {
			return fmt.Errorf("herd: join %q: metrics: a member %q of this group already has its metrics registered "+
				"with Config.Metrics (give each member of one process its own Config.Member, or its own registerer): %w: %w",
				m.cfg.Group, m.cfg.Member, store.ErrInvalid, are)
		}
		return fmt.Errorf("herd: join %q: metrics: %w: %w", m.cfg.Group, store.ErrInvalid, err)
	}
	m.metrics = mm
	m.st = mm.Store(m.st)
	return nil
}

// SessionLive reports whether the member holds a live session: open, not
// lost or fenced, and its fence time not come. It is false between sessions
// and once the member has stopped. A health check can report it: while it
// is false the member runs no handler it could not be sure to own.
func (m *Member) SessionLive() bool {
	s := m.running.live.Load()
	return s != nil && s.ctx.Err() == nil && !s.pastFence()
}
