package herd

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/herdhq/herd/store"
)

// session is one incarnation of the member in the store, with its renewal
// goroutine (renew.go) and its fence time.
type session struct {
	id     string
	ctx    context.Context // cancelled (with a cause) when the session is lost or fenced
	cancel context.CancelCauseFunc
	renew  chan struct{} // closed when the renewal goroutine has returned
	seq    uint64        // the opening's number among the member's writes (Member.writes)
	opened time.Time     // when the opening was sent
	// fence is when the renewal goroutine fences the session unless a
	// renewal succeeds first (the last successful one's send time plus
	// SessionTTL-FenceMargin); the deadline of the handlers' store calls.
	fence   atomic.Pointer[time.Time]
	tieDone chan struct{} // closed when the tie's goroutine returned (nil: not tied)
	tie     store.Tie     // the tie it made, read after tieDone
}

func (s *session) setFence(t time.Time) { s.fence.Store(&t) }

// pastFence reports whether the session's fence time has come (a store
// call may fail at that instant before its context's timer fires).
func (s *session) pastFence() bool {
	t := s.fence.Load()
	return t != nil && !time.Now().Before(*t)
}

// withFence returns ctx bounded by the session's fence time, for every
// store call made for its handlers: none keeps a handler inside herd past
// the time another member may start its partition. ok false (make no call)
// once that time has come or the session is lost. A handoff cancels the
// handler's context, not the session's: its final checkpoint goes through.
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

// openSession opens a session and starts its goroutines. ctx and bound
// bound the attempt only; the session lives until lost or the member stops.
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
	// A new session starts from a new read of the group.
	m.rep.resync()
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

// noteExpiry tells the reconcile loop when the earliest session of the
// group expires; the latest news replaces what it has not read yet.
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
