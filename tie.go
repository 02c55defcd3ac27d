package herd

// A session's tie to a connection of the member's own: Config.TieSession.

import (
	"context"
	"fmt"

	"github.com/herdhq/herd/store"
)

// ErrTieLost is the cause of a session's context when its tied connection
// closed while the member lives (the server ended it, a proxy restarted).
// It wraps ErrFenced: the member stopped its handlers, as at its fence, and
// opens a new session.
var ErrTieLost = fmt.Errorf("%w: the session's tied connection closed", ErrFenced)

// startTie ties session s, if the member ties sessions and the store can,
// in a goroutine of its own (waited for by untie) that watches the tie until
// the session ends. Until the tie is made, or if it cannot be (logged), the
// session ends by TTL alone.
func (m *Member) startTie(s *session) {
	st := m.st
	if w, ok := st.(interface{ Unwrap() store.Store }); ok {
		st = w.Unwrap() // the metrics' wrapper
	}
	ct, ok := st.(store.ConnTied)
	if !m.cfg.TieSession || !ok {
		return
	}
	s.tieDone = make(chan struct{})
	go m.watchTie(s, ct)
}

func (m *Member) watchTie(s *session, ct store.ConnTied) {
	defer close(s.tieDone)
	if m.cfg.gate.Wait(s.ctx) != nil {
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, m.cfg.RenewTimeout)
	tie, err := ct.TieSession(ctx, m.cfg.Group, s.id, store.TieConfig{TTL: m.cfg.SessionTTL, Grace: m.cfg.TieGrace})
	cancel()
	if err != nil {
		if s.ctx.Err() == nil {
			m.log.Warn("cannot tie the session to a connection: a crash of this process is noticed after the session's TTL", "session", s.id, "err", err)
		}
		return
	}
	s.tie = tie // read by untie after tieDone is closed
	m.log.Debug("session tied to a connection", "session", s.id)
	select {
	case <-s.ctx.Done():
	case <-tie.Lost():
		m.log.Warn("the session's tied connection closed: cancelling handlers", "session", s.id, "err", tie.Err())
		s.cancel(ErrTieLost)
	}
}

// untie ends session s's tie, once the session's handlers have all
// returned: the store may then end the session after TieGrace (if it was
// not closed). Safe to call more than once, and for an untied session.
func (m *Member) untie(s *session) {
	if s.tieDone == nil {
		return
	}
	<-s.tieDone
	if s.tie != nil {
		_ = s.tie.Close()
	}
}
