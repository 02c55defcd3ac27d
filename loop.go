package herd

// The reconcile loop: one goroutine per member that owns the sessions, the
// slots and the timers, and moves between the member's states: between
// sessions (restoring, then opening one), running a session (planning on
// the replica, claiming, handing off), and leaving.

import (
	"context"
	"errors"
	"time"

	"github.com/herdhq/herd/store"
)

// run is the reconcile loop. It owns sess, slots and the timers.
func (m *Member) run(sess *session) {
	defer close(m.done)
	defer m.metrics.unregister() // before Done: the same member may join again
	defer m.stop()

	slots := map[string]*slot{}
	feedDone := make(chan struct{})
	go m.feedLoop(feedDone)
	relStop, relDone := make(chan struct{}), make(chan struct{})
	go m.rel.loop(relStop, relDone)

	// later wakes the loop when plan asked to look again (the end of
	// JoinSettle or of a hold, a contested claim): the replica is read
	// again, not the store.
	later := time.NewTimer(time.Hour)
	later.Stop()
	defer later.Stop()
	// expire fires just after the earliest session of the group would
	// expire if it is not renewed (renewals say when: noteExpiry), to
	// have the store end it: a crashed member's session ends on time, and
	// every replica learns it from the log.
	expire := time.NewTimer(time.Hour)
	expire.Stop()
	defer expire.Stop()
	expireAfter := func(d time.Duration) {
		// Just after the store would expire it; never spin.
		m.expireDue = time.Now().Add(max(d, 0))
		expire.Reset(max(d, 0) + expireDelay(m.cfg.SessionTTL))
	}
	// backstop: the log shows every change herd makes, but not a record
	// written, broken or repaired by hand. While the replica shows a
	// record broken that way (malformed, or a claim the store refused
	// although the replica showed the partition free), the group is read
	// anew every PollInterval, so that its repair is noticed (see Config).
	// Otherwise each member checks only its own records every
	// PollInterval (a few reads of MaxBatch records; see
	// ownRecordsIntact), and reads the whole group every ResyncInterval.
	backstop := time.NewTicker(m.cfg.PollInterval)
	defer backstop.Stop()
	resync := time.NewTicker(m.cfg.ResyncInterval)
	defer resync.Stop()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	backoff := 20 * time.Millisecond
	retryLater := func() {
		retry.Reset(backoff)
		backoff = min(2*backoff, m.cfg.RenewInterval)
	}

	leaving := false
	leaveCh := m.leaveCh
	// openDue: between sessions, whether to try (restore, then open a
	// session) at the next turn of the loop: at once after a loss, then
	// when the retry timer fires, not on every wake-up (a handler of the
	// lost session returning, a change event), which would make the
	// back-off moot and keep the loop from draining slotDone.
	openDue := false
	var orphans []*session // lost sessions whose handlers have not all returned

	sessionOf := func(s *session) int {
		n := 0
		for _, sl := range slots {
			if sl.sess == s {
				n++
			}
		}
		return n
	}
	// loseSession forgets sess: every handler of it is cancelled (the session
	// context already is), and it is closed in the store once they returned.
	loseSession := func() {
		cause := context.Cause(sess.ctx)
		sess.cancel(ErrSessionExpired)
		<-sess.renew
		for _, sl := range slots {
			if sl.sess == sess {
				sl.mode.Store(modeLost)
				if cp := sl.claim.restorePoint(); cp != nil {
					m.restores = append(m.restores, store.Ownership{Partition: sl.claim.Partition, Epoch: sl.claim.Epoch, Checkpoint: cp})
				}
			}
		}
		// Whether the store forgot the session or this member could not
		// reach it (fenced), the store may have lost its data meanwhile:
		// hold once the next session opens (see holdAfterLoss), unless
		// the log shows it kept its data (keptData).
		m.holdPending = true
		m.noteLossMark(sess)
		openDue = true
		if errors.Is(cause, ErrSessionExpired) {
			m.lossSeen = true // the store forgot the session
		}
		m.metrics.sessionLost(m)
		m.mu.Lock()
		clear(m.owned)
		m.sess = ""
		m.mu.Unlock()
		m.log.Warn("session lost; all partitions dropped", "session", sess.id, "partitions", sessionOf(sess), "cause", cause)
		orphans = append(orphans, sess)
		sess = nil
	}
	closeOrphans := func() {
		keep := orphans[:0]
		for _, o := range orphans {
			if sessionOf(o) > 0 {
				keep = append(keep, o)
				continue
			}
			// Every handler of the lost session has returned: close it so
			// that, if the store still thinks it alive (we fenced early),
			// others need not wait for its TTL.
			ctx, cancel := context.WithTimeout(m.runCtx, m.cfg.RenewTimeout)
			_ = m.st.CloseSession(ctx, m.cfg.Group, o.id)
			cancel()
		}
		orphans = keep
	}

	finish := func(err error) {
		if sess != nil {
			sess.cancel(err)
			<-sess.renew
		}
		for len(slots) > 0 {
			sl := <-m.slotDone
			delete(slots, sl.claim.Partition)
		}
		close(relStop) // every slot has returned: nothing more to release
		<-relDone
		m.stop() // ends the log reader (feedLoop)
		<-feedDone
		m.mu.Lock()
		clear(m.owned)
		m.sess = ""
		m.mu.Unlock()
		m.setErr(err)
	}

	for {
		if m.cfg.gate.Wait(m.runCtx) != nil {
			finish(m.runCtx.Err())
			return
		}
		if sess != nil && sess.ctx.Err() != nil {
			loseSession()
		}
		if leaving && len(slots) == 0 {
			if sess != nil {
				// Stop renewing first: a renewal in flight as the session
				// closes would be answered "expired", and reported as a
				// session lost.
				sess.cancel(ErrLeft)
				<-sess.renew
				ctx, cancel := context.WithTimeout(m.runCtx, m.cfg.RenewTimeout)
				err := m.st.CloseSession(ctx, m.cfg.Group, sess.id)
				cancel()
				if err != nil {
					m.log.Warn("closing session failed; it will expire after its TTL", "err", err)
				}
			}
			m.log.Info("left the group")
			finish(ErrLeft)
			return
		}
		if sess == nil && !leaving && openDue {
			openDue = false
			// Both calls are bounded by RenewTimeout and cancelled by
			// Leave, so a Leave during an outage is seen at once.
			if m.restore(m.attemptCtx) {
				m.lossSeen, m.logMark = true, nil // a record was missing: lost
			}
			s, err := m.openSession(m.attemptCtx, m.cfg.RenewTimeout)
			switch {
			case err == nil:
				sess = s
				backoff = 20 * time.Millisecond
				if m.holdPending && !m.keptData(m.attemptCtx) {
					m.holdAfterLoss(m.lossSeen)
				}
				m.holdPending, m.lossSeen, m.logMark = false, false, nil
				m.poke()
			case m.runCtx.Err() != nil:
				finish(m.runCtx.Err())
				return
			case m.attemptCtx.Err() != nil:
				// Leaving: the select below sees leaveCh.
			default:
				m.log.Warn("cannot open a session; retrying", "err", err)
				// As often as renewals are retried: the store may be back
				// any moment, and others may be waiting for this member
				// to restore its checkpoints (holdAfterLoss).
				retry.Reset(min(m.cfg.RenewInterval/4, 500*time.Millisecond))
			}
		}

		var sessDone <-chan struct{}
		if sess != nil {
			sessDone = sess.ctx.Done()
		}
		select {
		case <-m.runCtx.Done():
			finish(m.runCtx.Err())
			return
		case <-leaveCh:
			leaveCh = nil // a nil channel is never ready again
			leaving = true
			m.log.Info("leaving the group: handing off every partition", "partitions", len(slots))
			handed := m.rel.hold()
			for _, sl := range slots {
				m.handOff(sl)
			}
			handed()
			m.metrics.leaving(m)
			m.mu.Lock()
			clear(m.owned)
			m.mu.Unlock()
			continue
		case <-sessDone:
			continue
		case sl := <-m.slotDone:
			delete(slots, sl.claim.Partition)
			if sl.planInFull.Load() {
				m.rep.dropAim()
			}
			closeOrphans()
			// A partition was released or dropped: the target may now let
			// this member claim something, so plan again.
			if !leaving {
				m.poke()
			}
			continue
		case <-m.wake:
		case <-later.C:
		case <-backstop.C:
			if m.rep.broken() || (sess != nil && !m.ownRecordsIntact(sess)) {
				m.rep.resync()
			}
			continue
		case <-resync.C:
			m.rep.resync()
			continue
		case t := <-m.expireAt:
			expireAfter(time.Until(t))
			continue
		case <-expire.C:
			if sess == nil || leaving {
				continue
			}
			ctx, cancel := context.WithTimeout(sess.ctx, m.cfg.RenewTimeout)
			next, err := m.st.ExpireSessions(ctx, m.cfg.Group)
			cancel()
			if err == nil && next > 0 {
				expireAfter(next)
			}
			continue
		case <-retry.C:
			openDue = true
		}
		if leaving || sess == nil {
			continue
		}
		if wait := m.planGap - time.Since(m.plannedAt); wait > 0 {
			// Plan at the end of the gap: the changes until then, whatever
			// their number, cost one plan.
			later.Reset(wait)
			continue
		}
		next, err := m.reconcile(sess, slots)
		if err != nil {
			if sess.ctx.Err() == nil && m.runCtx.Err() == nil {
				m.reconcileFailed(err)
			}
			retryLater()
		} else {
			backoff = 20 * time.Millisecond
		}
		if next > 0 {
			later.Reset(next)
		}
	}
}
