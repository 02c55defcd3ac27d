package herd

// The reconcile loop: one goroutine per member that owns the sessions, the
// slots and the timers. In a session it plans, claims and hands off;
// between sessions it restores and opens one; leaving, it hands every
// partition off, closes the session and ends.

import (
	"context"
	"sync"
	"time"
)

// loopEvents is what other goroutines send the reconcile loop, besides Leave.
type loopEvents struct {
	wake     chan struct{}  // coalesced "plan again" signal (the replica changed, a slot ended)
	slotDone chan *slot     // a partition's goroutine finished
	expireAt chan time.Time // from renewals: when the group's earliest session expires (see runLoop.expire)
}

// firstBackoff is the first pause after a failed reconcile, doubled up to
// RenewInterval while failures go on.
const firstBackoff = 20 * time.Millisecond

// runLoop is the reconcile loop's own state: nothing else touches it.
type runLoop struct {
	m       *Member
	sess    *session         // the open session; nil between sessions
	slots   map[string]*slot // partitions with a goroutine here, by id
	orphans []*session       // lost sessions whose handlers have not all returned
	leaving bool             // Leave was called
	leaveCh <-chan struct{}  // m.life.leaveCh until it is seen closed, then nil
	openDue bool             // between sessions, open one at the next turn (after a loss, then when retry fires)
	backoff time.Duration    // the next pause after a failed reconcile

	later *time.Timer // when plan asked to look again (JoinSettle, a hold, a contested claim)
	// expire fires just after the group's earliest session would expire
	// unless renewed, to have the store end it: a crashed member's session
	// ends on time, and every replica learns it from the log.
	expire *time.Timer
	// backstop, as the log does not show a record edited by hand: every
	// PollInterval the group is read while the replica shows one broken,
	// else the next batch of own records is checked (ownRecordsIntact,
	// from ownFrom); resync reads the group every ResyncInterval.
	backstop *time.Ticker
	ownFrom  string
	resync   *time.Ticker
	retry    *time.Timer // between sessions: the next attempt to open one; after a failed reconcile, the next plan

	feeding   sync.WaitGroup // the log reader (feedLoop), ended with the member's runCtx
	releasing sync.WaitGroup // the releaser's loop, ended by closing relStop
	relStop   chan struct{}
}

// run is the reconcile loop, started by Join with the first session.
func (m *Member) run(sess *session) {
	defer close(m.life.done)
	defer m.metrics.Unregister() // before Done: the same member may join again
	defer m.life.stop()
	l := m.newRunLoop(sess)
	for {
		if stop, why := l.step(); stop {
			l.finish(why)
			return
		}
	}
}

// newRunLoop starts the log reader, the releaser and the loop's timers.
func (m *Member) newRunLoop(sess *session) *runLoop {
	l := &runLoop{
		m:        m,
		sess:     sess,
		slots:    map[string]*slot{},
		leaveCh:  m.life.leaveCh,
		backoff:  firstBackoff,
		later:    stoppedTimer(),
		expire:   stoppedTimer(),
		retry:    stoppedTimer(),
		backstop: time.NewTicker(m.cfg.PollInterval),
		resync:   time.NewTicker(m.cfg.ResyncInterval),
		relStop:  make(chan struct{}),
	}
	l.feeding.Go(m.feedLoop)
	l.releasing.Go(func() { m.rel.loop(l.relStop) })
	return l
}

func stoppedTimer() *time.Timer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}

// inSession reports whether a session is open and Leave was not called.
func (l *runLoop) inSession() bool { return l.sess != nil && !l.leaving }

// step is one turn of the loop: it settles the state (a session lost, a
// leave complete, a session to open), waits for one event, and plans if
// the event calls for it. It reports stop, and why, when the loop ends.
func (l *runLoop) step() (stop bool, why error) {
	m := l.m
	if m.cfg.gate.Wait(m.runCtx) != nil {
		return true, m.runCtx.Err()
	}
	if l.sess != nil && l.sess.ctx.Err() != nil {
		l.loseSession()
	}
	switch {
	case l.leaving:
		if len(l.slots) == 0 {
			l.closeSession()
			m.log.Info("left the group")
			if m.life.leaveRequested {
				return true, ErrLeaveRequested
			}
			return true, ErrLeft
		}
	case l.sess == nil && l.openDue:
		l.openDue = false
		if !l.openSession() {
			return true, m.runCtx.Err()
		}
	}
	plan, ok := l.await()
	if !ok {
		return true, m.runCtx.Err()
	}
	if plan && l.inSession() {
		l.plan()
	}
	return false, nil
}

// await waits for one event and handles it. It reports plan if the event
// calls for a plan, and ok false if the member stops.
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
	case sl := <-m.events.slotDone:
		l.slotReturned(sl)
	case <-m.events.wake:
		return true, true
	case <-l.later.C:
		return true, true
	case <-l.backstop.C:
		if m.rep.broken() {
			m.rep.resync()
		} else if l.sess != nil {
			var intact bool
			if intact, l.ownFrom = m.ownRecordsIntact(l.sess, l.ownFrom); !intact {
				m.rep.resync()
			}
		}
	case <-l.resync.C:
		m.rep.resync()
	case t := <-m.events.expireAt:
		l.expireAfter(time.Until(t))
	case <-l.expire.C:
		l.expireSessions()
	case <-l.retry.C:
		l.openDue = true
		return true, true
	}
	return false, true
}

// plan reconciles once, unless the last full plan was too recent (planGap)
// and this one would be full too: the loop then plans at the gap's end, one
// plan for the changes until then. A plan on the target (target.go) costs
// only the entries since, so it is made at once: releases toward this
// member are claimed as they come (TestJoinerClaimsWithoutPlanGap: 101
// against 121 ms on 20,000).
func (l *runLoop) plan() {
	m := l.m
	if wait := m.planner.planGap - time.Since(m.planner.plannedAt); wait > 0 && !m.canPlanOnTarget(l.sess) {
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

// expireAfter arms the expire timer for a session due to expire in d, to
// fire just after the store would expire it.
func (l *runLoop) expireAfter(d time.Duration) {
	l.m.planner.expireDue = time.Now().Add(max(d, 0))
	l.expire.Reset(max(d, 0) + expireDelay(l.m.cfg.SessionTTL))
}

// expireSessions has the store end the sessions due, arms the timer for
// the next, and has plan wait for the log to bring what the call expired:
// the call moves expireDue on, and a plan on a copy without that expiry
// claims what the plan after it gives to others (TestCrashesPlannedOnSlowLog:
// 2 full plans per member without, on a log 200 ms late).
func (l *runLoop) expireSessions() {
	m := l.m
	if !l.inSession() {
		return
	}
	ctx, cancel := context.WithTimeout(l.sess.ctx, m.cfg.RenewTimeout)
	next, err := m.st.ExpireSessions(ctx, m.cfg.Group)
	cancel()
	if err == nil {
		m.rep.awaitLog()
	}
	if err == nil && next > 0 {
		l.expireAfter(next)
	}
}

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
	delete(l.slots, sl.c.Partition)
	if sl.planInFull.Load() {
		m.rep.dropTarget()
	}
	l.closeOrphans()
	// The target may now let this member claim something.
	if !l.leaving {
		m.wakeLoop()
	}
}
