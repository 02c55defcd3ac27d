package herd

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/herdhq/herd/store"
)

// session is one incarnation of the member in the store, with its renewal
// goroutine (renew.go), its fence time and its tie (Config.TieSession).
type session struct {
	id     string
	ctx    context.Context // cancelled (with a cause) when the session is lost or fenced
	cancel context.CancelCauseFunc
	renew  chan struct{} // closed when the renewal goroutine has returned
	seq    uint64        // the opening's number among the member's writes (Member.writes)
	opened time.Time     // when the opening was sent
	// fence is when the renewal goroutine fences the session (Claim.FenceTime),
	// the deadline of the handlers' store calls.
	fence   atomic.Pointer[time.Time]
	tieDone chan struct{} // closed when the tie's goroutine returned (nil: not tied)
	tie     store.Tie     // the tie it made, read after tieDone
}

func (s *session) setFence(t time.Time) { s.fence.Store(&t) }

// end cancels s (if not already, with cause) and waits for its renewal.
func (s *session) end(cause error) { s.cancel(cause); <-s.renew }

// pastFence reports whether the session's fence time has come (a store
// call may fail at that instant before its context's timer fires).
func (s *session) pastFence() bool {
	t := s.fence.Load()
	return t != nil && !time.Now().Before(*t)
}

// withFence bounds ctx by the fence time, for every store call made for the
// handlers: none keeps a handler inside herd past the time another member
// may start its partition. ok false (make no call) once that time has come
// or the session is lost; a handoff cancels the handler's context, not the
// session's, so that its final checkpoint goes through.
func (s *session) withFence(ctx context.Context) (_ context.Context, _ context.CancelFunc, ok bool) {
	if s.ctx.Err() != nil || s.pastFence() {
		return ctx, func() {}, false
	}
	t := s.fence.Load()
	if t == nil {
		return ctx, func() {}, true // a session made by a test; openSession sets it
	}
	fctx, cancel := context.WithDeadlineCause(ctx, *t, ErrFenced)
	return fctx, cancel, true
}

// openSession opens a session and starts its goroutines; ctx and bound
// bound the attempt only.
func (m *Member) openSession(ctx context.Context, bound time.Duration) (*session, error) {
	if err := m.cfg.gate.Wait(ctx); err != nil {
		return nil, err
	}
	sent := time.Now()
	ctx, cancel := context.WithTimeout(ctx, bound)
	id, err := m.st.OpenSession(ctx, m.cfg.Group, m.cfg.Member, m.cfg.Weight, m.cfg.SessionTTL)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("open session: %w", err)
	}
	sctx, scancel := context.WithCancelCause(m.runCtx)
	s := &session{id: id, ctx: sctx, cancel: scancel, renew: make(chan struct{}), seq: m.writes.Add(1), opened: sent}
	m.rep.resync() // a new session starts from a new read of the group
	s.setFence(sent.Add(m.cfg.SessionTTL - m.cfg.FenceMargin))
	m.running.live.Store(s)
	m.log.Debug("session opened", "session", id)
	go m.renewLoop(s, sent)
	if m.meter != nil {
		go m.reportLoop(s)
	}
	m.startTie(s)
	return s, nil
}

// noteExpiry tells the reconcile loop when the group's earliest session
// expires, replacing news not read yet; it never blocks.
func (m *Member) noteExpiry(t time.Time) {
	for {
		select {
		case m.events.expireAt <- t:
			return
		default:
		}
		select {
		case <-m.events.expireAt:
		default:
		}
	}
}

// ErrTieLost is the cause of a session's end when its tied connection
// closed while the member lives (the server ended it, a proxy restarted).
// It wraps ErrFenced: handlers stop as at the fence; a new session opens.
var ErrTieLost = fmt.Errorf("%w: the session's tied connection closed", ErrFenced)

// startTie ties s, if the member ties sessions and the store can, in a
// goroutine (waited for by untie) that watches the tie until s ends.
func (m *Member) startTie(s *session) {
	st := m.st
	if w, ok := st.(interface{ Unwrap() store.Store }); ok {
		st = w.Unwrap() // the metrics' wrapper
	}
	if ct, ok := st.(store.ConnTied); ok && m.cfg.TieSession {
		s.tieDone = make(chan struct{})
		go m.watchTie(s, ct)
	}
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

// untie ends s's tie once its handlers have all returned. Safe to call
// again, and untied.
func (m *Member) untie(s *session) {
	if s.tieDone == nil {
		return
	}
	<-s.tieDone
	if s.tie != nil {
		_ = s.tie.Close()
	}
}
