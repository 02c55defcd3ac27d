package herd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herdhq/herd/store"
)

// Member is one process taking part in a group. Create it with Join.
//
// Goroutines, each with one owner:
//   - the reconcile loop (owned by Join, waited for by Done) owns all state
//     about sessions and partitions; everything below is started and waited
//     for by it;
//   - one renewal goroutine per session: it only renews and fences, so no
//     handler and no slow reconcile can delay a renewal;
//   - one reader of the group's log, which feeds the replica (feedLoop);
//   - one goroutine per partition being run (the handler, then the release).
type Member struct {
	cfg Config
	st  store.Store
	log *slog.Logger

	runCtx context.Context // cancelled = crash (Join's ctx) or end of Leave
	stop   context.CancelFunc
	// attemptCtx bounds the store calls made between sessions (restores,
	// opening a session): it is cancelled by Leave, so a Leave during an
	// outage does not wait for them.
	attemptCtx  context.Context
	stopAttempt context.CancelFunc

	leaveOnce sync.Once
	leaveCh   chan struct{} // closed by Leave
	done      chan struct{} // closed when every goroutine has returned

	wake     chan struct{} // coalesced "plan again" signal (the replica changed, a slot ended)
	slotDone chan *slot    // a partition's goroutine finished
	errMu    sync.Mutex
	err      error // why the member stopped, for Leave/Err

	// Owned by the reconcile loop: checkpoints to put back after a session
	// loss, and until when partitions without a live owner are left alone
	// (see holdAfterLoss).
	restores    []store.Ownership
	holdFresh   time.Time         // until then, record-less partitions are left alone
	holdFree    time.Time         // until then, every partition without a live owner too
	holdPending bool              // a session was lost: hold once the next one opens
	lossSeen    bool              // since then, the store showed it lost data
	lastRecords int               // ownership records in the last snapshot
	lastParts   []store.Partition // the last partition set the store held (possibly emptied)
	sessions    map[string]bool   // live sessions at the last reconcile
	joinedAt    time.Time         // when a new session was last seen

	// Owned by the reconcile loop too: what malformed.go has reported.
	malformed   map[string]bool // malformed records already reported
	corruptSeen string          // the corrupt-group error already reported, "" if none

	step     stepLog // what the current rebalance step changed, for its log line
	incoming int     // partitions the last plan gave this member that others still hold
	// plannedAt is when plan last ran, and planGap the least time until
	// it runs again (see planGap).
	plannedAt time.Time
	planGap   time.Duration

	rep replica // the member's copy of the group, fed by feedLoop
	// writes counts this member's completed writes that the replica must
	// show before plan may judge them (a session opened, a batch of
	// claims): each is numbered when its call returns, and a read of the
	// group that began after it shows it (replica.base).
	writes atomic.Uint64
	// expireAt carries, from the renewal goroutine to the reconcile loop,
	// when the earliest session of the group expires (KeepAlive's next):
	// the loop calls ExpireSessions just after, so that a crashed member's
	// session ends on time and every replica learns it through the log.
	expireAt chan time.Time

	mu    sync.Mutex
	owned map[string]uint64 // partitions with a running handler -> epoch
	// handlers counts, per partition, the handler goroutines that have not
	// returned, including those cancelled for a handoff or a loss (which
	// owned no longer lists); Leave's timeout error names them.
	handlers map[string]int
	sess     string // current session id, "" if none

	// Records this member released (partition -> epoch) that its replica
	// may still show as its own: plan does not release them again.
	relMu    sync.Mutex
	released map[string]uint64
	rel      *releaser // batches the releases of handed-off slots

	metrics *memberMetrics          // nil without Config.Metrics (metrics.go)
	live    atomic.Pointer[session] // the last session opened, for SessionLive
}

// Errors a member reports.
var (
	// ErrNotOwner is returned by Claim.Checkpoint when the claim's epoch is
	// stale or the member's session has expired.
	ErrNotOwner = store.ErrNotOwner
	// ErrSessionExpired: the member's session is gone from the store.
	ErrSessionExpired = store.ErrSessionExpired
	// ErrFenced: the member cancelled its handlers because it could not renew
	// its session in time.
	ErrFenced = errors.New("herd: session could not be renewed in time; handlers cancelled (self-fenced)")
	// ErrLeft: the member has left the group.
	ErrLeft = errors.New("herd: member has left the group")
)

// Join opens a session for cfg.Member in cfg.Group and starts taking part:
// it claims its share of the partitions and runs cfg.Handler for each. It
// returns once the session is open. Cancelling ctx stops the member as a
// crash would (handlers cancelled, nothing released: the session expires
// after SessionTTL and others take over); call Leave to hand over gracefully.
func Join(ctx context.Context, st store.Store, cfg Config) (*Member, error) {
	if err := checkJoinArgs(ctx, st); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if cfg.Partitions != nil {
		if err := st.SetPartitions(ctx, cfg.Group, cfg.Partitions); err != nil {
			return nil, fmt.Errorf("herd: join %q: set partitions: %w", cfg.Group, err)
		}
	}
	runCtx, stop := context.WithCancel(ctx)
	attemptCtx, stopAttempt := context.WithCancel(runCtx)
	m := &Member{
		cfg:         cfg,
		st:          st,
		log:         cfg.Logger.With("group", cfg.Group, "member", cfg.Member),
		runCtx:      runCtx,
		stop:        stop,
		attemptCtx:  attemptCtx,
		stopAttempt: stopAttempt,
		leaveCh:     make(chan struct{}),
		done:        make(chan struct{}),
		wake:        make(chan struct{}, 1),
		slotDone:    make(chan *slot),
		owned:       map[string]uint64{},
		expireAt:    make(chan time.Time, 1),
		released:    map[string]uint64{},
	}
	m.rel = newReleaser(m)
	if err := m.registerMetrics(); err != nil {
		stop()
		return nil, err
	}
	sess, err := m.openSession(runCtx)
	if err != nil {
		m.metrics.unregister()
		stop()
		return nil, fmt.Errorf("herd: join %q: %w", cfg.Group, err)
	}
	go m.run(sess)
	return m, nil
}

// Leave hands every partition over gracefully: handlers are cancelled, each
// partition is released as soon as its handler has returned, then the session
// is closed, which wakes the other members at once. It returns when all that
// is done, or with an error if ctx ends first (the member goes on leaving in
// the background; cancel Join's context to abandon it).
func (m *Member) Leave(ctx context.Context) error {
	if ctx == nil {
		return errNilContext("leave")
	}
	m.leaveOnce.Do(func() { close(m.leaveCh); m.stopAttempt() })
	select {
	case <-m.done:
		if err := m.Err(); err != nil && !errors.Is(err, ErrLeft) {
			return err
		}
		return nil
	case <-ctx.Done():
		if waiting := m.handlersRunning(); len(waiting) > 0 {
			return fmt.Errorf("herd: leave %q: handlers have not returned yet (%s): %w",
				m.cfg.Group, listIDs(waiting), ctx.Err())
		}
		return fmt.Errorf("herd: leave %q: every handler has returned; still releasing partitions and closing the session: %w",
			m.cfg.Group, ctx.Err())
	}
}

// handlersRunning lists, sorted, the partitions whose handlers have not
// returned, including those being handed off, which Owned leaves out (and
// Leave hands off all of them).
func (m *Member) handlersRunning() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Sorted(maps.Keys(m.handlers))
}

// handlerStarted and handlerReturned keep m.handlers: the partitions whose
// handler goroutines have not returned, whether they still own them or are
// being handed off or dropped.
func (m *Member) handlerStarted(p string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.handlers == nil {
		m.handlers = map[string]int{}
	}
	m.handlers[p]++
}

func (m *Member) handlerReturned(p string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.handlers[p]--; m.handlers[p] <= 0 {
		delete(m.handlers, p)
	}
}

// Done is closed when the member has stopped (left, or crashed via Join's ctx)
// and every goroutine it started has returned.
func (m *Member) Done() <-chan struct{} { return m.done }

// Err says why the member stopped (ErrLeft after Leave, the context's error
// after a cancellation); nil while running.
func (m *Member) Err() error {
	m.errMu.Lock()
	defer m.errMu.Unlock()
	return m.err
}

// ID is the member id.
func (m *Member) ID() string { return m.cfg.Member }

// Session is the id of the member's current session, "" between sessions.
func (m *Member) Session() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sess
}

// Owned lists, sorted, the partitions this member owns and runs a handler
// for. Those being handed off or dropped are left out from the moment their
// handlers are cancelled (a Leave that times out names those whose handlers
// have not returned).
func (m *Member) Owned() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Sorted(maps.Keys(m.owned))
}

// SetPartitions replaces the group's partition set for every member.
func (m *Member) SetPartitions(ctx context.Context, ps []store.Partition) error {
	if ctx == nil {
		return errNilContext("set partitions")
	}
	if err := store.ValidatePartitions(ps); err != nil {
		return fmt.Errorf("herd: set partitions: %w", err)
	}
	if err := m.st.SetPartitions(ctx, m.cfg.Group, ps); err != nil {
		return fmt.Errorf("herd: set partitions: %w", err)
	}
	m.poke()
	return nil
}

func (m *Member) poke() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

func (m *Member) setErr(err error) {
	m.errMu.Lock()
	defer m.errMu.Unlock()
	if m.err == nil {
		m.err = err
	}
}

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
		expire.Reset(max(d, 0) + max(m.cfg.SessionTTL/100, 5*time.Millisecond))
	}
	// backstop: the log shows every change herd makes, but not a record
	// written, broken or repaired by hand; the group is read anew every
	// PollInterval so that such an edit is noticed (see Config).
	backstop := time.NewTicker(m.cfg.PollInterval)
	defer backstop.Stop()
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
		// hold once the next session opens (see holdAfterLoss).
		m.holdPending = true
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
		if m.cfg.Gate.wait(m.runCtx) != nil {
			finish(m.runCtx.Err())
			return
		}
		if sess != nil && sess.ctx.Err() != nil {
			loseSession()
		}
		if leaving && len(slots) == 0 {
			if sess != nil {
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
				m.lossSeen = true
			}
			s, err := m.openSession(m.attemptCtx)
			switch {
			case err == nil:
				sess = s
				backoff = 20 * time.Millisecond
				if m.holdPending {
					m.holdAfterLoss(m.lossSeen)
					m.holdPending, m.lossSeen = false, false
				}
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
			for _, sl := range slots {
				sl.mode.CompareAndSwap(modeRun, modeHandoff)
				sl.cancel()
			}
			m.metrics.leaving(m)
			m.mu.Lock()
			clear(m.owned)
			m.mu.Unlock()
			continue
		case <-sessDone:
			continue
		case sl := <-m.slotDone:
			delete(slots, sl.claim.Partition)
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

// reconcile computes the target assignment from the replica and moves
// this member toward it: drops partitions it lost, hands off those the
// target gives to others, claims free ones the target gives it. It returns
// when to look again (0: when the replica changes).
//
// Planning (plan) costs O(P) time for P partitions, whatever the share of
// this member, and no store operation: the replica is fed by the group's
// log. Claiming and releasing go to the store in batches.
func (m *Member) reconcile(sess *session, slots map[string]*slot) (next time.Duration, err error) {
	defer m.logStep()
	tctx, cancel := context.WithTimeout(sess.ctx, m.cfg.SessionTTL)
	defer cancel()
	ctx, fcancel, ok := sess.withFence(tctx)
	defer fcancel()
	if !ok {
		return 0, nil // the session is being fenced; the loop opens a new one
	}
	pl, err := m.plan(ctx, sess, slots)
	if err != nil || pl.expired || pl.wait {
		return pl.next, err
	}

	// Partitions the target gives us and that are free, in ID order.
	if done, err := m.claimAll(ctx, sess, slots, pl.claim); done || err != nil {
		return pl.next, err
	}

	// Records the store says are ours but we do not run (a Claim whose reply
	// was lost) and the target gives to others: release them.
	var held []store.Ownership
	for _, r := range pl.release {
		if slots[r.Partition] == nil {
			held = append(held, r)
		}
	}
	for len(held) > 0 {
		n := min(len(held), store.MaxBatch)
		if _, err := m.st.ReleaseBatch(ctx, m.cfg.Group, sess.id, held[:n]); err != nil {
			if errors.Is(err, store.ErrCorrupt) {
				// The group's keys broke, which the log cannot show:
				// read the group, whose failure is reported (once).
				m.rep.distrust()
				return pl.next, nil
			}
			return pl.next, fmt.Errorf("release %d records: %w", n, err)
		}
		// Each is released, or no longer ours (ErrNotOwner), or
		// malformed (ErrCorrupt, listed at the next read): none is to be
		// released again, whatever the replica shows until its entry.
		m.noteReleased(held[:n])
		held = held[n:]
	}
	return pl.next, nil
}

// claimAll claims the partitions ps, skipping those already running here,
// in batches of store.MaxBatch, and starts their handlers. A partition
// claimed by another member first, or whose record turns out malformed,
// is skipped (see replica.contested). It reports done if the session
// turned out to be expired.
func (m *Member) claimAll(ctx context.Context, sess *session, slots map[string]*slot, ps []string) (done bool, err error) {
	ps = slices.DeleteFunc(slices.Clone(ps), func(p string) bool { return slots[p] != nil })
	for len(ps) > 0 {
		batch := ps[:min(len(ps), store.MaxBatch)]
		ps = ps[len(batch):]
		res, err := m.st.ClaimBatch(ctx, m.cfg.Group, sess.id, batch)
		switch {
		case errors.Is(err, store.ErrSessionExpired):
			sess.cancel(ErrSessionExpired)
			return true, nil
		case errors.Is(err, store.ErrCorrupt):
			// As in reconcile: read the group, whose failure is reported.
			m.rep.distrust()
			return true, nil
		case err != nil:
			return false, fmt.Errorf("claim %d partitions: %w", len(batch), err)
		case len(res) != len(batch):
			return false, fmt.Errorf("claim %d partitions: the store answered %d results: %w", len(batch), len(res), store.ErrCorrupt)
		}
		seq := m.writes.Add(1)
		for i, r := range res {
			p := batch[i]
			switch {
			case r.Err == nil:
				m.start(sess, slots, r.Ownership, seq)
				m.step.claim(p, r.Ownership.Epoch)
			case errors.Is(r.Err, store.ErrClaimed):
				// Someone got there first: our replica has not shown it
				// yet. Its entry is on its way; if it does not come, the
				// replica is stale and plan reads the group anew.
				m.rep.contest(p, time.Now())
			case errors.Is(r.Err, store.ErrCorrupt):
				// Its record broke since the read: it costs this partition
				// only. The log does not show that (nothing herd wrote), so
				// read the group: it lists the record as malformed
				// (reported once, not placed).
				m.rep.contest(p, time.Now())
				m.rep.resync()
			default:
				return false, fmt.Errorf("claim %q: %w", p, r.Err)
			}
		}
	}
	return false, nil
}

// noteReleased records that this member released the records held (or
// found them not its own), so that plan does not release them again while
// the replica has not shown the release yet.
func (m *Member) noteReleased(held []store.Ownership) {
	m.relMu.Lock()
	defer m.relMu.Unlock()
	for _, r := range held {
		m.released[r.Partition] = r.Epoch
	}
}

// releasedAlready reports whether this member released partition p at
// epoch; it forgets p once the replica shows a record that is not that one
// of this member (cur is the record's epoch, mine whether it names this
// member's session).
func (m *Member) releasedAlready(p string, epoch uint64, mine bool) bool {
	m.relMu.Lock()
	defer m.relMu.Unlock()
	e, ok := m.released[p]
	if ok && (!mine || e != epoch) {
		delete(m.released, p)
		return false
	}
	return ok
}

// holdAfterLoss makes the member leave partitions alone for SessionTTL,
// because the store may just have lost its data and their previous owners
// may be about to restore their records: record-less partitions, and if
// all (the store showed that it lost data), every partition without a live
// owner.
//
// It is called when a new session opens after one was lost: whether the
// store forgot the session or this member could not reach the store and
// fenced itself, the store may have lost data meanwhile. all is set if the
// store forgot the session, or one of this member's restores wrote
// something; plan also holds every free partition if it finds a
// record-less one during the hold, and when records vanish from a snapshot
// (records are never deleted otherwise).
//
// Why SessionTTL (or RenewInterval+2*RenewTimeout if longer): a member cut
// off from the store tries again at least every RenewInterval/4 (500 ms at
// most), each attempt restoring first (bounded by RenewTimeout) and then
// opening a session (bounded by RenewTimeout), so every member whose
// connection comes back when the first one's does has restored before the
// first one claims anything. A member that comes back later may find its partitions taken
// (doc.go says what is lost then). Why every
// free partition after a loss, not only record-less ones: a member that
// lost a partition long ago may restore its stale checkpoint first, and
// the newer owner's Restore (with a higher epoch) replaces it only while
// nobody has claimed it (see store.Store.Restore). Only record-less ones
// when there is no sign of a loss, so that a member back from a mere
// outage takes its share of handed-off partitions at once.
func (m *Member) holdAfterLoss(all bool) {
	until := time.Now().Add(max(m.cfg.SessionTTL, m.cfg.RenewInterval+2*m.cfg.RenewTimeout))
	if until.After(m.holdFresh) {
		m.holdFresh = until
	}
	if all && until.After(m.holdFree) {
		m.holdFree = until
	}
}

// restore puts back the last checkpoint this member wrote for each
// partition of a lost session, where the store has no record any more or
// only a released one with a lower epoch. Restore writes nothing over an
// owned record or one with an epoch as high, so this is harmless when the
// store kept its data, and keeps checkpoints from going backwards when it
// did not: of all the members that held a partition, the last one (the
// highest epoch) wins.
//
// The whole pass is bounded by one RenewTimeout, and stops at the first
// call the store does not answer: during an outage it costs one timeout,
// not one per partition. What is left is tried again before the next
// session is opened, or at the next read. The partition set is put back
// too if the store holds none, whether or not any checkpoint is pending (a
// member whose handlers never checkpointed still knows the set). A pending
// restore is kept until
// the store answers it, however long that takes: it can never beat a newer
// owner's (see above). It reports whether it wrote anything, which shows
// that the store had lost data.
func (m *Member) restore(ctx context.Context) (wrote bool) {
	if len(m.restores) == 0 && len(m.lastParts) == 0 {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, m.cfg.RenewTimeout)
	defer cancel()
	if len(m.lastParts) > 0 {
		// A store that lost its data lost the partition set too.
		snap, err := m.st.Snapshot(ctx, m.cfg.Group)
		// Only a set the store does not hold at all was lost; an empty
		// one was emptied on purpose and stays so.
		if err == nil && len(snap.Partitions) == 0 && !snap.PartitionSetStored {
			if err := m.st.SetPartitions(ctx, m.cfg.Group, m.lastParts); err == nil {
				m.log.Info("restored the partition set the store had lost", "partitions", len(m.lastParts))
				wrote = true
			}
		}
	}
	// Several lost sessions may have held one partition: keep the last.
	slices.SortStableFunc(m.restores, func(a, b store.Ownership) int {
		if c := strings.Compare(a.Partition, b.Partition); c != 0 {
			return c
		}
		return cmp.Compare(b.Epoch, a.Epoch)
	})
	m.restores = slices.CompactFunc(m.restores, func(a, b store.Ownership) bool { return a.Partition == b.Partition })
	keep := m.restores[:0]
	for i, r := range m.restores {
		err := ctx.Err()
		if err == nil {
			err = m.st.Restore(ctx, m.cfg.Group, r.Partition, r.Epoch, r.Checkpoint)
		}
		switch {
		case err == nil:
			m.log.Info("restored a checkpoint the store had lost", "partition", r.Partition, "epoch", r.Epoch)
			wrote = true
		case errors.Is(err, store.ErrNotOwner), errors.Is(err, store.ErrInvalid), errors.Is(err, store.ErrCorrupt):
			// A newer record is there, or this one can never be written.
		default:
			// Store unreachable, or the pass is out of time: keep this one
			// and the rest for the next pass.
			m.restores = append(keep, m.restores[i:]...)
			return wrote
		}
	}
	m.restores = keep
	return wrote
}
