package herd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herdhq/herd/store"
)

// session is one incarnation of the member in the store, with its renewal
// goroutine (renewLoop), its fence time and its tie (Config.TieSession).
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

// renewal is the outcome of one renewal attempt.
type renewal struct {
	sent time.Time
	next time.Duration // when the group's earliest session expires (KeepAlive)
	err  error
}

// renewLoop is the renewal goroutine of session s, which waits on nothing
// else. If no renewal has succeeded for SessionTTL-FenceMargin since the
// last successful one was sent, a timer of its own (a call can return after
// its deadline) cancels the session, and every handler, before the store
// can expire it. An attempt may run until the fence (cutting a slow store's
// call would throw its renewal away), and another starts beside it after
// RenewTimeout (the first may be stuck on a cut connection): at most about
// (SessionTTL-FenceMargin)/RenewTimeout are out. Whichever succeeds moves
// the fence to its send time plus SessionTTL-FenceMargin.
func (m *Member) renewLoop(s *session, lastSent time.Time) {
	defer close(s.renew)
	fenceAfter := m.cfg.SessionTTL - m.cfg.FenceMargin
	var once sync.Once
	fenceNow := func() {
		once.Do(func() {
			m.log.Warn("session not renewed in time: cancelling handlers", "session", s.id,
				"since_last_renewal", time.Since(*s.fence.Load())+fenceAfter)
			s.cancel(ErrFenced)
		})
	}
	fence := time.AfterFunc(fenceAfter-time.Since(lastSent), func() {
		// A paused member fires its timers once it resumes; a renewal may
		// have moved the fence on meanwhile (the loop re-arms the timer).
		if m.cfg.gate.Wait(s.ctx) == nil && !time.Now().Before(*s.fence.Load()) {
			fenceNow()
		}
	})
	defer fence.Stop()
	results := make(chan renewal, 1)
	var attempts sync.WaitGroup
	defer attempts.Wait()
	out := 0 // attempts under way
	// Before the Wait: take the results of those still out.
	defer func() {
		for range out {
			<-results
		}
	}()
	next := time.NewTimer(m.cfg.RenewInterval)
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-next.C:
			if m.cfg.gate.Wait(s.ctx) != nil {
				return
			}
			if time.Since(lastSent) >= fenceAfter {
				fenceNow()
				return
			}
			out++
			// Bounded by the session's context, not the fence time: it may
			// succeed after that time, once an earlier one moved it.
			attempts.Go(func() {
				sent := time.Now()
				next, err := m.st.KeepAlive(s.ctx, m.cfg.Group, s.id, m.cfg.SessionTTL)
				m.metrics.Renewed(s.ctx, time.Since(sent), err)
				results <- renewal{sent: sent, next: next, err: err}
			})
			next.Reset(m.cfg.RenewTimeout) // another beside it if it is still out then
		case r := <-results:
			out--
			switch {
			case s.ctx.Err() != nil:
				return // fenced (or stopped) while the call was under way
			case r.err == nil:
				if r.next > 0 {
					m.noteExpiry(time.Now().Add(r.next))
				}
				if r.sent.After(lastSent) {
					lastSent = r.sent
					s.setFence(r.sent.Add(fenceAfter))
					fence.Reset(fenceAfter - time.Since(r.sent))
					next.Reset(m.cfg.RenewInterval - time.Since(r.sent))
				}
			case errors.Is(r.err, store.ErrSessionExpired):
				m.log.Warn("session expired in the store: cancelling handlers", "session", s.id)
				s.cancel(ErrSessionExpired)
				return
			case out == 0:
				m.log.Warn("session renewal failed; retrying", "session", s.id, "err", r.err)
				next.Reset(m.cfg.retryPause())
			default:
				m.log.Warn("session renewal failed; another attempt is under way", "session", s.id, "err", r.err)
			}
		}
	}
}
