package herd

// The reconcile loop's moves: a session lost, opened, left, and the end.

import (
	"context"
	"errors"

	"github.com/herdhq/herd/store"
)

// loseSession forgets the session: its handlers are cancelled, and it is
// closed in the store once they returned (closeOrphans).
func (l *runLoop) loseSession() {
	m, sess := l.m, l.sess
	cause := context.Cause(sess.ctx)
	sess.end(ErrSessionExpired)
	m.noteLostLoads(l.slotsOf(sess) > 0, sess.opened)
	for _, sl := range l.slots {
		if sl.sess == sess {
			sl.mode.Store(modeLost)
			if cp := sl.c.restorePoint(); cp != nil {
				m.loss.restores = append(m.loss.restores, store.Ownership{Partition: sl.c.Partition, Epoch: sl.c.Epoch, Checkpoint: cp})
			}
			m.noteLostLoad(sl.c.Partition)
		}
	}
	m.noteLossMark(sess) // the next session holds unless the log shows the store kept its data
	l.openDue = true
	if errors.Is(cause, ErrSessionExpired) {
		m.loss.lossSeen = true // the store forgot the session
	}
	m.metrics.SessionLost(m.ownedCount())
	m.running.dropOwned()
	m.running.live.Store(nil)
	m.log.Warn("session lost; all partitions dropped", "session", sess.id, "partitions", l.slotsOf(sess), "cause", cause)
	l.orphans = append(l.orphans, sess)
	l.sess = nil
}

// closeOrphans closes the lost sessions whose handlers have all returned.
func (l *runLoop) closeOrphans() {
	m := l.m
	keep := l.orphans[:0]
	for _, o := range l.orphans {
		if l.slotsOf(o) > 0 {
			keep = append(keep, o)
			continue
		}
		_ = m.closeStoreSession(o.id) // alive in the store if we fenced early: others need not wait its TTL
		m.untie(o)
	}
	l.orphans = keep
}

// openSession, between sessions, restores what the lost session left to
// restore and opens a new session. It reports false if the member stops;
// another failure arms the retry timer.
func (l *runLoop) openSession() bool {
	m := l.m
	// Both calls are bounded by RenewTimeout and cancelled by Leave.
	if m.restore(m.life.attemptCtx) {
		m.loss.lossSeen, m.loss.logMark = true, nil // a record was missing: lost
	}
	s, err := m.openSession(m.life.attemptCtx, m.cfg.RenewTimeout)
	switch {
	case err == nil:
		l.sess = s
		l.backoff = firstBackoff
		// Hold unless the log goes on from the mark (the new session's
		// entry follows it: the read returns at once).
		lost := m.readFromMark(m.life.attemptCtx, m.cfg.RenewTimeout) != nil
		if lost {
			m.holdAfterLoss(m.loss.lossSeen)
		}
		m.restoreLoads(m.life.attemptCtx, s, lost && m.loss.lossSeen, lost && len(m.loss.restores) > 0)
		m.loss.lossSeen, m.loss.logMark = false, nil
		m.wakeLoop()
	case m.runCtx.Err() != nil:
		return false
	case m.life.attemptCtx.Err() != nil:
		// Leaving: the loop's wait sees leaveCh.
	default:
		m.log.Warn("cannot open a session; retrying", "err", err)
		// As often as renewals: others may wait for this member's restores.
		l.retry.Reset(m.cfg.retryPause())
	}
	return true
}

// startLeaving hands every partition off, as Leave asked.
func (l *runLoop) startLeaving() {
	m := l.m
	l.leaveCh = nil // a nil channel is never ready again
	l.leaving = true
	m.log.Info("leaving the group: handing off every partition", "partitions", len(l.slots))
	m.metrics.Leaving(m.ownedCount())
	handed := m.rel.hold()
	for _, sl := range l.slots {
		m.handOff(sl)
	}
	handed()
	m.running.dropOwned()
}

// closeSession closes the session once every partition is handed off.
func (l *runLoop) closeSession() {
	m, sess := l.m, l.sess
	if sess == nil {
		return
	}
	// Stop renewing first, or a renewal in flight would be answered
	// "expired" and reported as a session lost.
	sess.end(ErrLeft)
	if err := m.closeStoreSession(sess.id); err != nil {
		m.log.Warn("closing session failed; it will expire after its TTL", "err", err)
	}
	m.untie(sess)
}

func (m *Member) closeStoreSession(id string) error {
	ctx, cancel := context.WithTimeout(m.runCtx, m.cfg.RenewTimeout)
	defer cancel()
	return m.st.CloseSession(ctx, m.cfg.Group, id)
}

// finish ends the loop: it stops the session's renewal, waits for every
// slot, the releaser and the log reader, and records why the member stopped.
func (l *runLoop) finish(err error) {
	m, sessions := l.m, l.orphans
	if l.sess != nil {
		l.sess.end(err)
		sessions = append(sessions, l.sess)
	}
	for len(l.slots) > 0 {
		sl := <-m.events.slotDone
		delete(l.slots, sl.c.Partition)
	}
	// Every handler has returned: the ties may go (the store ends sessions
	// not closed TieGrace later).
	for _, s := range sessions {
		m.untie(s)
	}
	close(l.relStop) // every slot has returned: nothing more to release
	l.releasing.Wait()
	m.life.stop() // ends the log reader (feedLoop)
	l.feeding.Wait()
	m.running.dropOwned()
	m.running.live.Store(nil)
	m.life.err = err
}
