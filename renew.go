package herd

import (
	"errors"
	"sync"
	"time"

	"github.com/herdhq/herd/store"
)

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
