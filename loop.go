package herd

// The reconcile loop: one goroutine per member that owns the sessions, the
// slots and the timers, and moves between the member's states (loopState):
// running a session (planning on the replica, claiming, handing off),
// between sessions (restoring, then opening one), and leaving. Each turn
// of the loop (step) settles the state, waits for one event, and plans if
// the event asks for it.

import (
	"context"
	"errors"
	"time"

	"github.com/herdhq/herd/store"
)

// loopState is where the reconcile loop stands.
type loopState int

const (
	// inSession: a session is open; the loop plans on the replica,
	// claims and hands off.
	inSession loopState = iota
	// betweenSessions: the session was lost; the loop restores the
	// checkpoints of the lost partitions, then opens a new session,
	// retrying with back-off.
	betweenSessions
	// leaving: Leave was called; every partition is handed off, then the
	// session (if any) is closed and the loop ends.
	leaving
)

// firstBackoff is the first pause after a failed reconcile, doubled up to
// RenewInterval while failures go on.
const firstBackoff = 20 * time.Millisecond

// runLoop is the reconcile loop's own state: nothing else reads or writes
// it.
type runLoop struct {
	m       *Member
	sess    *session         // the open session; nil between sessions
	slots   map[string]*slot // partitions with a goroutine here, by id
	orphans []*session       // lost sessions whose handlers have not all returned
	leaving bool             // Leave was called
	leaveCh <-chan struct{}  // m.leaveCh until it is seen closed, then nil
	// openDue: between sessions, whether to try (restore, then open a
	// session) at the next turn of the loop: at once after a loss, then
	// when the retry timer fires, not on every wake-up (a handler of the
	// lost session returning, a change event), which would make the
	// back-off moot and keep the loop from draining slotDone.
	openDue bool
	backoff time.Duration // the next pause after a failed reconcile

	// later wakes the loop when plan asked to look again (the end of
	// JoinSettle or of a hold, a contested claim): the replica is read
	// again, not the store.
	later *time.Timer
	// expire fires just after the earliest session of the group would
	// expire if it is not renewed (renewals say when: noteExpiry), to
	// have the store end it: a crashed member's session ends on time, and
	// every replica learns it from the log.
	expire *time.Timer
	// backstop: the log shows every change herd makes, but not a record
	// written, broken or repaired by hand. While the replica shows a
	// record broken that way (malformed, or a claim the store refused
	// although the replica showed the partition free), the group is read
	// anew every PollInterval, so that its repair is noticed (see Config).
	// Otherwise each member checks only its own records every
	// PollInterval (a few reads of MaxBatch records; see
	// ownRecordsIntact), and reads the whole group every ResyncInterval.
	backstop *time.Ticker
	resync   *time.Ticker
	retry    *time.Timer // between sessions: the next attempt to open one; after a failed reconcile, the next plan

	feedDone chan struct{} // closed when feedLoop has returned
	relStop  chan struct{} // closed to end the releaser's loop
	relDone  chan struct{} // closed when it has returned
}

// run is the reconcile loop, started by Join with the first session.
func (m *Member) run(sess *session) {
	defer close(m.done)
	defer m.metrics.unregister() // before Done: the same member may join again
	defer m.stop()
	l := m.newRunLoop(sess)
	defer l.stopTimers()
	for {
		if stop, why := l.step(); stop {
			l.finish(why)
			return
		}
	}
}

// newRunLoop starts the log reader and the releaser, and the loop's timers.
func (m *Member) newRunLoop(sess *session) *runLoop {
	l := &runLoop{
		m:        m,
		sess:     sess,
		slots:    map[string]*slot{},
		leaveCh:  m.leaveCh,
		backoff:  firstBackoff,
		later:    stoppedTimer(),
		expire:   stoppedTimer(),
		retry:    stoppedTimer(),
		backstop: time.NewTicker(m.cfg.PollInterval),
		resync:   time.NewTicker(m.cfg.ResyncInterval),
		feedDone: make(chan struct{}),
		relStop:  make(chan struct{}),
		relDone:  make(chan struct{}),
	}
	go m.feedLoop(l.feedDone)
	go m.rel.loop(l.relStop, l.relDone)
	return l
}

func stoppedTimer() *time.Timer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}

func (l *runLoop) stopTimers() {
	l.later.Stop()
	l.expire.Stop()
	l.retry.Stop()
	l.backstop.Stop()
	l.resync.Stop()
}

// state names where the loop stands (see loopState).
func (l *runLoop) state() loopState {
	switch {
	case l.leaving:
		return leaving
	case l.sess == nil:
		return betweenSessions
	default:
		return inSession
	}
}

// step is one turn of the loop: it settles the state (a session lost, a
// leave complete, a session to open), waits for one event, and plans if
// the event calls for it. It reports stop, with why the member stops, when
// the loop is to end.
func (l *runLoop) step() (stop bool, why error) {
	m := l.m
	if m.cfg.gate.Wait(m.runCtx) != nil {
		return true, m.runCtx.Err()
	}
	if l.sess != nil && l.sess.ctx.Err() != nil {
		l.loseSession()
	}
	switch l.state() {
	case leaving:
		if len(l.slots) == 0 {
			l.closeSession()
			m.log.Info("left the group")
			return true, ErrLeft
		}
	case betweenSessions:
		if l.openDue {
			l.openDue = false
			if !l.openSession() {
				return true, m.runCtx.Err()
			}
		}
	}
	plan, ok := l.await()
	if !ok {
		return true, m.runCtx.Err()
	}
	if plan && l.state() == inSession {
		l.plan()
	}
	return false, nil
}

// await waits for one event and handles it. It reports plan if the event
// calls for a plan, and ok false if the member stops (Join's context
// ended).
func (l *runLoop) await() (plan, ok bool) {
	m := l.m
	var sessDone <-chan struct{}
	if l.sess != nil {
		sessDone = l.sess.ctx.Done()
	}
	select {
	case <-m.runCtx.Done():
		return false, false
	case <-l.leaveCh:
		l.startLeaving()
	case <-sessDone:
	case sl := <-m.slotDone:
		l.slotReturned(sl)
	case <-m.wake:
		return true, true
	case <-l.later.C:
		return true, true
	case <-l.backstop.C:
		if m.rep.broken() || (l.sess != nil && !m.ownRecordsIntact(l.sess)) {
			m.rep.resync()
		}
	case <-l.resync.C:
		m.rep.resync()
	case t := <-m.expireAt:
		l.expireAfter(time.Until(t))
	case <-l.expire.C:
		l.expireSessions()
	case <-l.retry.C:
		l.openDue = true
		return true, true
	}
	return false, true
}

// plan reconciles once, unless the last plan was too recent (planGap):
// then the loop plans at the end of the gap, and the changes until then,
// whatever their number, cost one plan.
func (l *runLoop) plan() {
	m := l.m
	if wait := m.planGap - time.Since(m.plannedAt); wait > 0 {
		l.later.Reset(wait)
		return
	}
	next, err := m.reconcile(l.sess, l.slots)
	if err != nil {
		if l.sess.ctx.Err() == nil && m.runCtx.Err() == nil {
			m.reconcileFailed(err)
		}
		l.retry.Reset(l.backoff)
		l.backoff = min(2*l.backoff, m.cfg.RenewInterval)
	} else {
		l.backoff = firstBackoff
	}
	if next > 0 {
		l.later.Reset(next)
	}
}

// expireAfter arms the expire timer for a session due to expire in d: just
// after the store would expire it; never spinning.
func (l *runLoop) expireAfter(d time.Duration) {
	l.m.expireDue = time.Now().Add(max(d, 0))
	l.expire.Reset(max(d, 0) + expireDelay(l.m.cfg.SessionTTL))
}

// expireSessions has the store end the sessions due to expire, and arms
// the timer for the next.
func (l *runLoop) expireSessions() {
	m := l.m
	if l.state() != inSession {
		return
	}
	ctx, cancel := context.WithTimeout(l.sess.ctx, m.cfg.RenewTimeout)
	next, err := m.st.ExpireSessions(ctx, m.cfg.Group)
	cancel()
	if err == nil && next > 0 {
		l.expireAfter(next)
	}
}

// slotsOf counts the slots of session s.
func (l *runLoop) slotsOf(s *session) int {
	n := 0
	for _, sl := range l.slots {
		if sl.sess == s {
			n++
		}
	}
	return n
}

// slotReturned forgets a slot whose goroutine has returned.
func (l *runLoop) slotReturned(sl *slot) {
	m := l.m
	delete(l.slots, sl.claim.Partition)
	if sl.planInFull.Load() {
		m.rep.dropAim()
	}
	l.closeOrphans()
	// A partition was released or dropped: the target may now let
	// this member claim something, so plan again.
	if !l.leaving {
		m.poke()
	}
}

// loseSession forgets the session: every handler of it is cancelled (the
// session context already is), and it is closed in the store once they
// returned (closeOrphans).
func (l *runLoop) loseSession() {
	m, sess := l.m, l.sess
	cause := context.Cause(sess.ctx)
	sess.cancel(ErrSessionExpired)
	<-sess.renew
	for _, sl := range l.slots {
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
	l.openDue = true
	if errors.Is(cause, ErrSessionExpired) {
		m.lossSeen = true // the store forgot the session
	}
	m.metrics.sessionLost(m)
	m.mu.Lock()
	clear(m.owned)
	m.sess = ""
	m.mu.Unlock()
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
		// Every handler of the lost session has returned: close it so
		// that, if the store still thinks it alive (we fenced early),
		// others need not wait for its TTL.
		ctx, cancel := context.WithTimeout(m.runCtx, m.cfg.RenewTimeout)
		_ = m.st.CloseSession(ctx, m.cfg.Group, o.id)
		cancel()
	}
	l.orphans = keep
}

// openSession, between sessions, restores what the lost session left to
// restore and opens a new session. It reports false if the member stops
// (Join's context ended); a failure otherwise arms the retry timer.
func (l *runLoop) openSession() bool {
	m := l.m
	// Both calls are bounded by RenewTimeout and cancelled by
	// Leave, so a Leave during an outage is seen at once.
	if m.restore(m.attemptCtx) {
		m.lossSeen, m.logMark = true, nil // a record was missing: lost
	}
	s, err := m.openSession(m.attemptCtx, m.cfg.RenewTimeout)
	switch {
	case err == nil:
		l.sess = s
		l.backoff = firstBackoff
		if m.holdPending && !m.keptData(m.attemptCtx) {
			m.holdAfterLoss(m.lossSeen)
		}
		m.holdPending, m.lossSeen, m.logMark = false, false, nil
		m.poke()
	case m.runCtx.Err() != nil:
		return false
	case m.attemptCtx.Err() != nil:
		// Leaving: the loop's wait sees leaveCh.
	default:
		m.log.Warn("cannot open a session; retrying", "err", err)
		// As often as renewals are retried: the store may be back
		// any moment, and others may be waiting for this member
		// to restore its checkpoints (holdAfterLoss).
		l.retry.Reset(min(m.cfg.RenewInterval/4, 500*time.Millisecond))
	}
	return true
}

// startLeaving hands every partition off, as Leave asked.
func (l *runLoop) startLeaving() {
	m := l.m
	l.leaveCh = nil // a nil channel is never ready again
	l.leaving = true
	m.log.Info("leaving the group: handing off every partition", "partitions", len(l.slots))
	handed := m.rel.hold()
	for _, sl := range l.slots {
		m.handOff(sl)
	}
	handed()
	m.metrics.leaving(m)
	m.mu.Lock()
	clear(m.owned)
	m.mu.Unlock()
}

// closeSession closes the session once every partition is handed off.
func (l *runLoop) closeSession() {
	m, sess := l.m, l.sess
	if sess == nil {
		return
	}
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

// finish ends the loop: it stops the session's renewal, waits for every
// slot, the releaser and the log reader, and records why the member
// stopped.
func (l *runLoop) finish(err error) {
	m := l.m
	if l.sess != nil {
		l.sess.cancel(err)
		<-l.sess.renew
	}
	for len(l.slots) > 0 {
		sl := <-m.slotDone
		delete(l.slots, sl.claim.Partition)
	}
	close(l.relStop) // every slot has returned: nothing more to release
	<-l.relDone
	m.stop() // ends the log reader (feedLoop)
	<-l.feedDone
	m.mu.Lock()
	clear(m.owned)
	m.sess = ""
	m.mu.Unlock()
	m.setErr(err)
}
