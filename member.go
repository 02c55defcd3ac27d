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

	"github.com/herdhq/herd/balance"
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
//   - one change-feed reader;
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

	wake     chan struct{} // coalesced "re-read the group" signal
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
	readAt      time.Time         // when reconcile last started reading the group
	readGap     time.Duration     // the least time between two reads (readGap)
	urgentGap   time.Duration     // the same after a membership change (1 µs per record)

	// Owned by the reconcile loop too: what malformed.go has reported.
	malformed   map[string]bool // malformed records already reported
	corruptSeen string          // the corrupt-group error already reported, "" if none

	dueAt time.Time // when the loop's timer is set to read again
	step  stepLog   // what the current rebalance step changed, for its log line

	urgent atomic.Bool // a member joined or left, or a session is due to expire: read soon

	mu    sync.Mutex
	owned map[string]uint64 // partitions with a running handler -> epoch
	// handlers counts, per partition, the handler goroutines that have not
	// returned, including those cancelled for a handoff or a loss (which
	// owned no longer lists); Leave's timeout error names them.
	handlers map[string]int
	sess     string // current session id, "" if none

	metrics *memberMetrics          // nil without Config.Metrics (metrics.go)
	live    atomic.Pointer[session] // the last session opened, for SessionLive

	// Partitions the last target gave this member while another member
	// still held them (incoming), and those of them whose release the change
	// feed has since announced (released), for the reconcile loop to claim
	// without waiting for its next read. Written by plan and watchLoop.
	inMu     sync.Mutex
	incoming map[string]bool
	released []string
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

// session is one incarnation of the member in the store.
type session struct {
	id     string
	ctx    context.Context // cancelled (with a cause) when the session is lost or fenced
	cancel context.CancelCauseFunc
	renew  chan struct{} // closed when the renewal goroutine has returned
	// fence is when the renewal goroutine fences the session unless a
	// renewal succeeds first: the last successful renewal's send time plus
	// SessionTTL-FenceMargin. Store calls made for the session's handlers
	// get it as their deadline, so none of them keeps a handler running
	// past it (a store client may honour deadlines but not cancellation).
	fence atomic.Pointer[time.Time]
}

// setFence records that the session is safe until t.
func (s *session) setFence(t time.Time) { s.fence.Store(&t) }

// pastFence reports whether the session's fence time has come (a store
// call may fail at that instant before its context's timer fires).
func (s *session) pastFence() bool {
	t := s.fence.Load()
	return t != nil && !time.Now().Before(*t)
}

// withFence returns ctx bounded by the session's fence time, whatever ctx
// is (context.Background() included): every store call made for one of the
// session's handlers goes through it, so none can keep a handler inside
// herd's code past the time after which another member may start its
// partition. It returns ok false, and the call must not be made, once that
// time has come or the session is cancelled (lost, or fenced):
//
//   - past the fence time the renewal goroutine is about to fence the
//     session (or the store about to expire it);
//   - a cancelled session has no fence time left to bound the call by. Its
//     handlers have been told, and may well save their last progress with
//     a context of their own (theirs is cancelled); on a slow store that
//     call would run past the session's expiry while a successor runs the
//     partition. At the very instant of the fence the renewal goroutine's
//     timer and a handler's periodic checkpoint may both fire: the session
//     is then cancelled although the clock reads exactly the fence time,
//     and the call is refused the same way.
//
// A handoff cancels a handler's context, not the session's: its final
// checkpoint goes through, bounded by the fence time.
func (s *session) withFence(ctx context.Context) (_ context.Context, _ context.CancelFunc, ok bool) {
	if s.ctx.Err() != nil {
		return ctx, func() {}, false
	}
	t := s.fence.Load()
	if t == nil {
		return ctx, func() {}, true // unreachable: openSession sets it
	}
	if !time.Now().Before(*t) {
		return ctx, func() {}, false
	}
	fctx, cancel := context.WithDeadlineCause(ctx, *t, ErrFenced)
	return fctx, cancel, true
}

// slot modes, read by a partition's goroutine after its context is cancelled.
const (
	modeRun      int32 = iota // owned and running
	modeHandoff               // handing off: release after the handler returns
	modeLost                  // lost: return without releasing
	modeGiveBack              // the handler returned ErrGiveBack: give the partition back (GiveBack)
)

// slot is one partition this member runs or is stopping.
type slot struct {
	claim    *Claim
	sess     *session
	cancel   context.CancelFunc
	mode     atomic.Int32
	released atomic.Bool // set once released (normal path or ForceHandoff)
}

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
	}
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

// openSession opens a session and starts its renewal goroutine. ctx bounds
// the attempt only; the session lives until the member stops.
func (m *Member) openSession(ctx context.Context) (*session, error) {
	if err := m.cfg.Gate.wait(ctx); err != nil {
		return nil, err
	}
	sent := time.Now()
	ctx, cancel := context.WithTimeout(ctx, m.cfg.RenewTimeout)
	id, err := m.st.OpenSession(ctx, m.cfg.Group, m.cfg.Member, m.cfg.Weight, m.cfg.SessionTTL)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("open session: %w", err)
	}
	sctx, scancel := context.WithCancelCause(m.runCtx)
	s := &session{id: id, ctx: sctx, cancel: scancel, renew: make(chan struct{})}
	s.setFence(sent.Add(m.cfg.SessionTTL - m.cfg.FenceMargin))
	m.mu.Lock()
	m.sess = id
	m.mu.Unlock()
	m.live.Store(s)
	m.log.Debug("session opened", "session", id)
	go m.renewLoop(s, sent)
	return s, nil
}

// renewLoop keeps one session alive. It never waits on handlers or on the
// reconcile loop. If no renewal has succeeded for SessionTTL-FenceMargin since
// the last successful one was sent, it cancels the session's context, which
// cancels every handler of that session before the store can expire it
// (self-fencing); the reconcile loop then opens a new session.
func (m *Member) renewLoop(s *session, lastSent time.Time) {
	defer close(s.renew)
	fenceAfter := m.cfg.SessionTTL - m.cfg.FenceMargin
	fence := time.NewTimer(fenceAfter)
	defer fence.Stop()
	next := time.NewTimer(m.cfg.RenewInterval)
	defer next.Stop()
	retry := min(m.cfg.RenewInterval/4, 500*time.Millisecond)
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-fence.C:
		case <-next.C:
		}
		if m.cfg.Gate.wait(s.ctx) != nil {
			return
		}
		left := fenceAfter - time.Since(lastSent)
		if left <= 0 {
			m.log.Warn("session not renewed in time: cancelling handlers", "session", s.id, "since_last_renewal", time.Since(lastSent))
			s.cancel(ErrFenced)
			return
		}
		sent := time.Now()
		ctx, cancel := context.WithTimeout(s.ctx, min(m.cfg.RenewTimeout, left))
		_, err := m.st.KeepAlive(ctx, m.cfg.Group, s.id, m.cfg.SessionTTL)
		cancel()
		m.metrics.renewed(s.ctx, time.Since(sent), err)
		switch {
		case err == nil:
			lastSent = sent
			s.setFence(sent.Add(fenceAfter))
			fence.Reset(fenceAfter - time.Since(sent))
			next.Reset(m.cfg.RenewInterval - time.Since(sent))
		case errors.Is(err, store.ErrSessionExpired):
			m.log.Warn("session expired in the store: cancelling handlers", "session", s.id)
			s.cancel(ErrSessionExpired)
			return
		case s.ctx.Err() != nil:
			return
		default:
			m.log.Warn("session renewal failed; retrying", "session", s.id, "err", err)
			next.Reset(retry)
		}
	}
}

// watchLoop forwards change events as wake-ups until the member stops. If the
// feed cannot be opened or ends early it is opened again after a pause, and
// the group is re-read.
func (m *Member) watchLoop(done chan<- struct{}) {
	defer close(done)
	backoff := 50 * time.Millisecond
	for m.runCtx.Err() == nil {
		ch, err := m.st.Watch(m.runCtx, m.cfg.Group)
		if err == nil {
			backoff = 50 * time.Millisecond
			m.forgetIncoming() // events may have been missed
			m.poke()
			for ev := range ch {
				if m.cfg.Gate.wait(m.runCtx) != nil {
					break
				}
				// Our own claims, releases and join need no re-read: the
				// loop already acts on them.
				if (ev.Kind == store.EventClaimed || ev.Kind == store.EventReleased || ev.Kind == store.EventJoined) && ev.Session != "" && ev.Session == m.Session() {
					continue
				}
				switch ev.Kind {
				case store.EventReleased:
					m.noteReleased(ev.Partition)
				case store.EventClaimed:
					// Another member's claim: the target stands.
				case store.EventJoined, store.EventLeft:
					m.forgetIncoming()
					m.urgent.Store(true)
				default:
					m.forgetIncoming()
				}
				m.poke()
			}
		} else if m.runCtx.Err() == nil {
			m.log.Warn("change feed unavailable; relying on polling until it returns", "err", err)
		}
		select {
		case <-m.runCtx.Done():
		case <-time.After(backoff):
			backoff = min(2*backoff, m.cfg.RenewInterval)
		}
	}
}

// run is the reconcile loop. It owns sess, slots and the timers.
func (m *Member) run(sess *session) {
	defer close(m.done)
	defer m.metrics.unregister() // before Done: the same member may join again
	defer m.stop()

	slots := map[string]*slot{}
	watchDone := make(chan struct{})
	go m.watchLoop(watchDone)

	poll := time.NewTimer(m.cfg.PollInterval)
	defer poll.Stop()
	// expiry wakes the loop when the first other session would expire if it
	// is not renewed, so a crashed member is noticed at its TTL without
	// depending on the store to announce expiries.
	expiry := time.NewTimer(time.Hour)
	expiry.Stop()
	defer expiry.Stop()
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
				if cp := sl.claim.LastCheckpoint(); cp != nil {
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
		m.stop() // ends the change feed
		<-watchDone
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
			// this member claim something, so re-read.
			if !leaving {
				m.poke()
			}
			continue
		case <-m.wake:
		case <-poll.C:
		case <-expiry.C:
			m.urgent.Store(true)
		case <-retry.C:
			openDue = true
		}
		if leaving || sess == nil {
			continue
		}
		next, err := m.reconcile(sess, slots)
		if err != nil {
			if sess.ctx.Err() == nil && m.runCtx.Err() == nil {
				m.reconcileFailed(err)
			}
			m.urgent.Store(true) // finish what the failed call left undone
			retryLater()
		} else {
			backoff = 20 * time.Millisecond
		}
		if next > 0 {
			expiry.Reset(next)
			m.dueAt = time.Now().Add(next)
		}
		poll.Reset(m.cfg.PollInterval)
	}
}

// reconcile reads the group, computes the target assignment and moves this
// member toward it: drops partitions it lost, hands off those the target
// gives to others, claims free ones the target gives it. It returns when to
// look again (for an expiring session, or after a read it put off; 0: no
// need).
//
// Reading and computing (plan) costs O(P) time for P partitions, whatever
// the share of this member; claiming and releasing, which wait on the
// store, hold only the list of partitions to change, not the snapshot.
// Every claim and release wakes every member, so a rebalance that moves
// many partitions would make each member read the whole group once per
// store round trip while it lasts; reads are therefore spaced (readGap):
// the events that arrive in between are acted on by one read at the end of
// the gap. A lone event (a crash, a graceful handoff) is read at once.
func (m *Member) reconcile(sess *session, slots map[string]*slot) (time.Duration, error) {
	defer m.logStep()
	tctx, cancel := context.WithTimeout(sess.ctx, m.cfg.SessionTTL)
	defer cancel()
	ctx, fcancel, ok := sess.withFence(tctx)
	defer fcancel()
	if !ok {
		return 0, nil // the session is being fenced; the loop opens a new one
	}
	// Partitions handed to us since the last read need no read: the target
	// that gave them to us was computed then. (If it has changed since,
	// the next read hands them on; the store lets only one owner in.)
	if done, err := m.claimAll(ctx, sess, slots, m.takeReleased()); done || err != nil {
		return 0, err
	}
	gap := m.readGap
	if m.urgent.Load() {
		gap = m.urgentGap
	}
	if wait := gap - time.Since(m.readAt); wait > 0 {
		// Read again at the end of the gap: the wake-ups until then,
		// whatever their number, cost one read. A read already due
		// earlier (the end of JoinSettle, an expiring session) stays due.
		if due := time.Until(m.dueAt); due > 0 && due < wait {
			wait = due
		}
		return wait, nil
	}
	m.urgent.Store(false)
	pl, err := m.plan(ctx, sess, slots)
	if err != nil || pl.expired {
		return 0, err
	}

	// Partitions the target gives us and that are free, in ID order.
	if done, err := m.claimAll(ctx, sess, slots, pl.claim); done || err != nil {
		return pl.next, err
	}
	if pl.settle {
		m.poke()
	}

	// Records the store says are ours but we do not run (a Claim whose reply
	// was lost) and the target gives to others: release them.
	for _, r := range pl.release {
		if slots[r.Partition] != nil {
			continue
		}
		if err := m.st.Release(ctx, m.cfg.Group, r.Partition, sess.id, r.Epoch); err != nil && !errors.Is(err, store.ErrNotOwner) {
			return pl.next, fmt.Errorf("release %q: %w", r.Partition, err)
		}
	}
	return pl.next, nil
}

// claimAll claims the partitions ps, skipping those already running here
// or claimed by another member first, and starts their handlers. It reports
// done if the session turned out to be expired.
func (m *Member) claimAll(ctx context.Context, sess *session, slots map[string]*slot, ps []string) (done bool, err error) {
	for _, p := range ps {
		if slots[p] != nil {
			continue
		}
		o, err := m.st.Claim(ctx, m.cfg.Group, p, sess.id)
		switch {
		case err == nil:
			m.start(sess, slots, o)
			m.step.claim(p, o.Epoch)
		case errors.Is(err, store.ErrClaimed):
			// Someone got there first: their view differed from ours,
			// so ours is out of date. Read again soon.
			m.urgent.Store(true)
		case errors.Is(err, store.ErrSessionExpired):
			sess.cancel(ErrSessionExpired)
			return true, nil
		case errors.Is(err, store.ErrCorrupt):
			// Its record broke since the read: it costs this partition
			// only. The next read lists it as malformed (reported once,
			// not placed), or fails as a whole if the group is corrupt.
			m.urgent.Store(true)
		default:
			return false, fmt.Errorf("claim %q: %w", p, err)
		}
	}
	return false, nil
}

// noteReleased records that the change feed announced partition p released,
// if the last target gives it to this member.
func (m *Member) noteReleased(p string) {
	m.inMu.Lock()
	defer m.inMu.Unlock()
	if m.incoming[p] {
		delete(m.incoming, p)
		m.released = append(m.released, p)
	}
}

// takeReleased returns the partitions noteReleased recorded, and forgets them.
func (m *Member) takeReleased() []string {
	m.inMu.Lock()
	defer m.inMu.Unlock()
	ps := m.released
	m.released = nil
	return ps
}

// setIncoming replaces the partitions the target gives this member while
// others hold them. Releases already noted are kept if the new target also
// gives them to this member (they may have happened after the read).
func (m *Member) setIncoming(ps []string) {
	m.inMu.Lock()
	defer m.inMu.Unlock()
	if m.incoming == nil {
		m.incoming = map[string]bool{}
	}
	clear(m.incoming)
	for _, p := range ps {
		m.incoming[p] = true
	}
	keep := m.released[:0]
	for _, p := range m.released {
		if m.incoming[p] {
			delete(m.incoming, p)
			keep = append(keep, p)
		}
	}
	m.released = keep
}

// forgetIncoming forgets the partitions the last target gave this member:
// the membership or the partition set has changed, so the target is stale
// until the next read.
func (m *Member) forgetIncoming() {
	m.inMu.Lock()
	defer m.inMu.Unlock()
	clear(m.incoming)
	m.released = nil
}

// readGap is the least time between two reads of a group of p partitions
// (or records) and n live members, the last read having taken took. It is
// the larger of
//   - 1 µs per record, so that a member reads at most about a million
//     records a second during a burst of changes (under a thousand
//     partitions it is less than a store round trip), and
//   - 4n times the last read: the n members, each reading at most once per
//     gap, then keep a shared store busy with reads at most a quarter of the
//     time. A read that took long because the store was busy lengthens the
//     gap, so the fleet backs off when the store is loaded (16 members
//     placing 10,000 partitions together over one Redis otherwise queue
//     every claim behind the others' reads);
//
// and never more than limit (SessionTTL/40, 250 ms by default), so a burst
// delays a member's reaction by at most that. When a member has joined or
// left, or a session is due to expire, only the first applies (urgentGap):
// partitions wait for an owner, or the spread is no longer fair. Such
// events come one per member, not one per partition.
func readGap(p, n int, took, limit time.Duration) time.Duration {
	return min(max(time.Duration(p)*time.Microsecond, 4*time.Duration(n)*took), limit)
}

// reconcilePlan is what plan decided: the store calls left to make.
type reconcilePlan struct {
	next    time.Duration // when to look again for an expiring session
	expired bool          // the store no longer knows the session
	// settle: a partition to claim was given back by another member, and
	// kept off it (avoidGivers): once it is claimed, read again, because
	// balancing may then move another partition to the giver.
	settle  bool
	claim   []string // partitions to claim, in ID order
	release []store.Ownership
}

// reconcileBuf is plan's working memory, O(P) for P partitions. It is
// reused from one reconcile to the next (and between the members of one
// process) so that a reconcile of a large group allocates next to nothing.
type reconcileBuf struct {
	sessIdx  map[string]int32 // live session id -> index in members
	members  []balance.Member // live sessions, sorted by id
	parts    []balance.Partition
	owner    []int32           // per partition: index in members of its live owner, or -1
	rec      []int32           // per partition: index of its record in the snapshot, or -1
	target   []int32           // per partition: index in members of its target owner
	strays   []int32           // records of ours for partitions outside the set
	avoid    []int32           // per partition: index in members of the live session that gave it back, or -1 (avoidGivers)
	checked  []store.Partition // the last partition set found sorted
	from     []store.Partition // the partition set parts was made from
	assigner balance.Assigner
}

var reconcileBufs = sync.Pool{New: func() any { return &reconcileBuf{sessIdx: map[string]int32{}} }}

// plan reads the group, computes the target assignment, drops the partitions
// this member lost and starts handing off those the target gives to others
// (neither waits on the store), and returns what is left to claim and to
// release. The snapshot is not kept.
func (m *Member) plan(ctx context.Context, sess *session, slots map[string]*slot) (reconcilePlan, error) {
	var pl reconcilePlan
	m.readAt = time.Now()
	snap, err := m.st.Snapshot(ctx, m.cfg.Group)
	if err != nil {
		return pl, fmt.Errorf("read group: %w", err)
	}
	m.corruptRepaired()
	m.reportMalformed(snap.Malformed)
	records, limit := max(len(snap.Partitions), len(snap.Owners)), m.cfg.SessionTTL/40
	m.readGap = readGap(records, len(snap.Sessions), time.Since(m.readAt), limit)
	m.urgentGap = readGap(records, 0, 0, limit)
	if len(snap.Partitions) > 0 || snap.PartitionSetStored {
		m.lastParts = snap.Partitions // follows a set emptied on purpose
	}
	if len(snap.Owners) < m.lastRecords {
		// Records are never deleted: the store lost data (a failover to a
		// replica that missed the last writes may keep our session).
		m.log.Warn("ownership records vanished from the store: it lost data", "records", len(snap.Owners), "before", m.lastRecords)
		m.holdAfterLoss(true)
	}
	m.lastRecords = len(snap.Owners)
	// Restores that failed before this session opened, or a partition set
	// the store lost (put back even when no checkpoint is pending).
	lostSet := !snap.PartitionSetStored && len(snap.Partitions) == 0 && len(m.lastParts) > 0
	if (len(m.restores) > 0 || lostSet) && m.restore(ctx) {
		m.holdAfterLoss(true)
	}
	// A linear scan, not snap.Alive: that trusts the store's sort order,
	// which sorted (below) checks only later.
	if !slices.ContainsFunc(snap.Sessions, func(s store.SessionInfo) bool { return s.ID == sess.id }) {
		// The store no longer knows us (expired, or it lost its data):
		// everything we run is no longer ours.
		sess.cancel(ErrSessionExpired)
		pl.expired = true
		return pl, nil
	}
	if m.sessions == nil {
		m.sessions = map[string]bool{}
	}
	for _, s := range snap.Sessions {
		if !m.sessions[s.ID] {
			m.joinedAt = time.Now()
		}
		if s.ID != sess.id && (pl.next == 0 || s.Remaining < pl.next) {
			pl.next = s.Remaining
		}
	}
	clear(m.sessions)
	for _, s := range snap.Sessions {
		m.sessions[s.ID] = true
	}
	if pl.next > 0 {
		// Look just after the store would expire it; never spin.
		pl.next += max(m.cfg.SessionTTL/100, 5*time.Millisecond)
	}
	if wait := m.cfg.JoinSettle - time.Since(m.joinedAt); wait > 0 {
		// A member just joined: others may be joining with it. Wait for
		// the membership to settle so the fleet moves once.
		pl.next = wait
		return pl, nil
	}

	b := reconcileBufs.Get().(*reconcileBuf)
	defer reconcileBufs.Put(b)
	sessions, parts, owners := b.sorted(snap)
	parts = unplaceable(parts, snap.Malformed)
	clear(b.sessIdx)
	b.members = b.members[:0]
	for i, s := range sessions {
		b.sessIdx[s.ID] = int32(i)
		b.members = append(b.members, balance.Member{ID: s.ID, Weight: s.Weight})
	}
	me := b.sessIdx[sess.id]

	if !b.join(sessions, parts, owners, sess.id) {
		// The store broke its promise of records sorted by partition.
		owners = sortedOwners(owners)
		b.join(sessions, parts, owners, sess.id)
	}
	target, err := b.assigner.AssignSorted(b.members, b.parts, b.owner, b.target)
	if err != nil {
		return pl, fmt.Errorf("assign: %w", err) // unreachable: the input is sorted
	}
	b.target = target
	// Partitions given back (ErrGiveBack) go to another member than the
	// one that gave them back, while it lives (givenback.go).
	b.avoid, _ = avoidGivers(b.members, b.parts, owners, b.rec, b.owner, target, b.sessIdx, b.avoid)

	// Partitions we run: keep, drop (lost) or hand off.
	for p, sl := range slots {
		if sl.sess != sess || sl.mode.Load() != modeRun {
			continue
		}
		i, inSet := slices.BinarySearchFunc(parts, p, func(x store.Partition, id string) int { return strings.Compare(x.ID, id) })
		var rec *store.Ownership
		if r, ok := slices.BinarySearchFunc(owners, p, func(x store.Ownership, id string) int { return strings.Compare(x.Partition, id) }); ok {
			rec = &owners[r]
		}
		switch {
		case rec == nil || rec.Session != sess.id || rec.Epoch != sl.claim.Epoch:
			m.step.dropLost(p)
			if cp := sl.claim.LastCheckpoint(); rec == nil && cp != nil {
				// Our record vanished: the store lost it. Put it back.
				m.restores = append(m.restores, store.Ownership{Partition: p, Epoch: sl.claim.Epoch, Checkpoint: cp})
				m.holdAfterLoss(true)
			}
			sl.mode.Store(modeLost)
			sl.cancel()
			m.unown(p)
		case !inSet || target[i] != me:
			m.step.handingOff(p)
			// Not over a give-back the handler has just begun: the
			// partition is released either way, and keeps its mark.
			sl.mode.CompareAndSwap(modeRun, modeHandoff)
			sl.cancel()
			m.unown(p)
		}
	}

	// Partitions the target gives us: claim the free ones, in ID order.
	var incoming []string
	now := time.Now()
	if now.Before(m.holdFresh) && m.holdFree.Before(m.holdFresh) && slices.Contains(b.rec, -1) {
		// Back from a session loss, the store has partitions without a
		// record: it lost data. Hold every free partition (holdAfterLoss).
		m.holdFree = m.holdFresh
	}
	for i, t := range target {
		if t != me {
			continue
		}
		p := parts[i].ID
		if slots[p] != nil {
			continue
		}
		holdUntil := time.Time{}
		switch {
		case b.owner[i] >= 0:
		case now.Before(m.holdFree):
			holdUntil = m.holdFree
		case b.rec[i] < 0 && now.Before(m.holdFresh):
			holdUntil = m.holdFresh
		}
		if o := b.owner[i]; o >= 0 && o != me {
			// Still held: its owner hands it off, and we claim it when the
			// change feed announces the release.
			incoming = append(incoming, p)
			continue
		}
		if !holdUntil.IsZero() {
			// The store may just have lost its data: its previous owners
			// may be about to restore this record (or a newer one over a
			// stale restore); see holdAfterLoss.
			wait := holdUntil.Sub(now)
			if pl.next == 0 || wait < pl.next {
				pl.next = wait
			}
			continue
		}
		// Free, or a record naming our session that we do not run (a
		// Claim whose reply was lost, a record a failover brought back):
		// Claim gives it a fresh epoch, so we never run the record's old one.
		pl.claim = append(pl.claim, p)
		if len(b.avoid) > 0 && b.avoid[i] >= 0 {
			pl.settle = true
		}
	}
	m.setIncoming(incoming)

	// Records the store says are ours but we do not run and the target
	// gives to others: release them (after the claims).
	for i, o := range b.owner {
		if o == me && target[i] != me && slots[parts[i].ID] == nil {
			r := &owners[b.rec[i]]
			pl.release = append(pl.release, store.Ownership{Partition: r.Partition, Epoch: r.Epoch})
		}
	}
	for _, j := range b.strays {
		if r := &owners[j]; slots[r.Partition] == nil {
			pl.release = append(pl.release, store.Ownership{Partition: r.Partition, Epoch: r.Epoch})
		}
	}
	return pl, nil
}

// sorted returns the snapshot's sessions and partitions, each sorted by id
// without duplicates, as the store contract promises (join checks the
// records). A backend that breaks the promise costs a sorted copy, in which
// the first of duplicates is kept, as balance.Assign does. A partition set
// already checked (the same read-only slice, shared between snapshots) is
// not checked again.
func (b *reconcileBuf) sorted(snap *store.Snapshot) ([]store.SessionInfo, []store.Partition, []store.Ownership) {
	ss, ps := snap.Sessions, snap.Partitions
	for i := 1; i < len(ss); i++ {
		if ss[i-1].ID >= ss[i].ID {
			ss = slices.Clone(ss)
			slices.SortStableFunc(ss, func(a, b store.SessionInfo) int { return strings.Compare(a.ID, b.ID) })
			ss = slices.CompactFunc(ss, func(a, b store.SessionInfo) bool { return a.ID == b.ID })
			break
		}
	}
	if !sameSlice(ps, b.checked) {
		b.checked = nil
		for i := 1; i < len(ps); i++ {
			if ps[i-1].ID >= ps[i].ID {
				ps = slices.Clone(ps)
				slices.SortStableFunc(ps, func(a, b store.Partition) int { return strings.Compare(a.ID, b.ID) })
				ps = slices.CompactFunc(ps, func(a, b store.Partition) bool { return a.ID == b.ID })
				break
			}
		}
		if sameSlice(ps, snap.Partitions) {
			b.checked = ps
		}
	}
	return ss, ps, snap.Owners
}

// sortedOwners returns a copy of rs sorted by partition, keeping the last
// of duplicate records (as a map would).
func sortedOwners(rs []store.Ownership) []store.Ownership {
	rs = slices.Clone(rs)
	slices.Reverse(rs)
	slices.SortStableFunc(rs, func(a, b store.Ownership) int { return strings.Compare(a.Partition, b.Partition) })
	return slices.CompactFunc(rs, func(a, b store.Ownership) bool { return a.Partition == b.Partition })
}

// sameSlice reports whether a and b are the same non-empty slice (same
// array, same length).
func sameSlice[T any](a, b []T) bool {
	return len(a) > 0 && len(a) == len(b) && &a[0] == &b[0]
}

// join joins the partition set with the records, both sorted by partition:
// it sets b.parts, and for each partition its record (b.rec) and live owner
// (b.owner), and lists our records for partitions outside the set
// (b.strays). It reports false, and the result is to be discarded, if the
// records turn out not to be sorted: the records it consumes are checked to
// increase strictly, at no cost where a record matches its partition.
//
// The owner found at the same index last time (by this member or, in a
// process running many, another) is tried before the map: it is usually
// right.
func (b *reconcileBuf) join(sessions []store.SessionInfo, parts []store.Partition, owners []store.Ownership, mine string) bool {
	P := len(parts)
	if !sameSlice(parts, b.from) {
		b.from = nil
		b.parts = resize(b.parts, P)
		for i, pt := range parts {
			b.parts[i] = balance.Partition{ID: pt.ID, Weight: pt.Weight}
		}
		b.from = parts
	}
	prev := b.owner
	b.owner, b.rec = resize(b.owner, P), resize(b.rec, P)
	b.strays = b.strays[:0]
	// stray consumes owners[j], which matches no partition.
	stray := func(j int) bool {
		if j > 0 && owners[j].Partition <= owners[j-1].Partition {
			return false
		}
		if owners[j].Session == mine {
			b.strays = append(b.strays, int32(j))
		}
		return true
	}
	j := 0
	for i, pt := range parts {
		guess := int32(-1)
		if i < len(prev) {
			guess = prev[i] // read before b.owner[i] (the same array) is written
		}
		b.owner[i], b.rec[i] = -1, -1
		if j < len(owners) && owners[j].Partition != pt.ID {
			for j < len(owners) && owners[j].Partition < pt.ID {
				if !stray(j) {
					return false
				}
				j++
			}
			if j == len(owners) || owners[j].Partition != pt.ID {
				continue // no record
			}
		}
		if j == len(owners) {
			continue
		}
		b.rec[i] = int32(j)
		if s := owners[j].Session; s != "" {
			if guess >= 0 && int(guess) < len(sessions) && sessions[guess].ID == s {
				b.owner[i] = guess
			} else if k, ok := b.sessIdx[s]; ok {
				b.owner[i] = k
			}
		}
		j++
	}
	for ; j < len(owners); j++ {
		if !stray(j) {
			return false
		}
	}
	return true
}

// resize returns s with length n, reallocated only if its capacity is short.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n, n+n/8)
	}
	return s[:n]
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

func (m *Member) unown(p string) {
	m.mu.Lock()
	delete(m.owned, p)
	m.mu.Unlock()
}

// start runs the handler for a freshly claimed partition.
func (m *Member) start(sess *session, slots map[string]*slot, o store.Ownership) {
	hctx, cancel := context.WithCancel(sess.ctx)
	sl := &slot{sess: sess, cancel: cancel}
	part, epoch := o.Partition, o.Epoch
	sl.claim = &Claim{
		Partition: part,
		Epoch:     epoch,
		ctx:       hctx,
		sess:      sess,
		m:         m,
		last:      o.Checkpoint,
		write:     m.claimWrite(sess, part, epoch),
	}
	sl.claim.trackProgress()
	slots[part] = sl
	m.mu.Lock()
	m.owned[part] = epoch
	m.mu.Unlock()
	m.handlerStarted(part) // before the goroutine, for a Leave that follows at once
	go m.runSlot(sl)
}

// claimWrite returns a claim's write function: the one path by which every
// store call made for a handler (Claim.Checkpoint, and anything else that
// writes for a claim) reaches the store. It bounds the call by the session's
// fence time whatever context the handler passes, and refuses it at once,
// with an error wrapping ErrFenced and ErrNotOwner, past that time or once
// the session is lost (see session.withFence).
func (m *Member) claimWrite(sess *session, part string, epoch uint64) func(ctx context.Context, v []byte) error {
	group := m.cfg.Group
	return m.metrics.countFencing(func(ctx context.Context, v []byte) error {
		fctx, cancel, ok := sess.withFence(ctx)
		defer cancel()
		if !ok {
			why := "the session was not renewed in time"
			if sess.ctx.Err() != nil {
				why = "the session is lost or fenced"
			}
			return fmt.Errorf("%w: nothing written, as %s: %w", ErrFenced, why, store.ErrNotOwner)
		}
		err := m.st.Checkpoint(fctx, group, part, epoch, v)
		if err != nil && ctx.Err() == nil && (errors.Is(context.Cause(fctx), ErrFenced) || sess.pastFence()) {
			return fmt.Errorf("%w: the write did not complete before the session's fence time (it may have been applied; its epoch fences it): %w", ErrFenced, err)
		}
		return err
	})
}

// runSlot runs one partition's handler until its context is cancelled, then
// releases the partition if it is being handed off, and reports to the loop.
func (m *Member) runSlot(sl *slot) {
	c := sl.claim
	ctx := c.ctx
	w := &watchdog{m: m, sl: sl}
	// Armed by the cancellation, on context.AfterFunc's goroutine; disarmed
	// as soon as the handler has returned, so it can neither fire for a
	// handler that returned in time nor outlive this goroutine.
	stopArm := context.AfterFunc(ctx, w.arm)
	defer func() { m.slotDone <- sl }()
	for {
		err := m.callHandler(c)
		if errors.Is(err, ErrGiveBack) && m.giveBack(sl, err) {
			break
		}
		if ctx.Err() != nil {
			break
		}
		if err != nil {
			m.log.Error("handler failed; restarting it", "partition", c.Partition, "err", err, "after", m.cfg.RestartDelay)
		}
		select {
		case <-ctx.Done():
		case <-time.After(m.cfg.RestartDelay):
		}
		if ctx.Err() != nil {
			break
		}
	}
	stopArm()
	w.disarm()
	m.handlerReturned(c.Partition)
	m.finishProgress(sl) // the last Mark is written before the release
	if mode := sl.mode.Load(); mode == modeHandoff || mode == modeGiveBack {
		m.release(sl)
	}
}

// giveBack switches a slot whose handler returned ErrGiveBack to giving the
// partition back, unless it is lost (then it is only dropped), and reports
// whether it did.
func (m *Member) giveBack(sl *slot, err error) bool {
	if !sl.mode.CompareAndSwap(modeRun, modeGiveBack) && !sl.mode.CompareAndSwap(modeHandoff, modeGiveBack) {
		return false
	}
	c := sl.claim
	m.log.Warn("handler gave the partition back; another member will run it if there is one", "partition", c.Partition, "epoch", c.Epoch, "err", err)
	sl.cancel() // the claim's context: the handler has returned, anything it started stops
	m.unown(c.Partition)
	return true
}

// watchdog warns, or with ForceHandoff releases the partition, when a
// handler being handed off has not returned within MaxShutdown.
//
// The race it must avoid: the handler's context is cancelled; the handler
// returns at once and runSlot cleans up; only then does context.AfterFunc's
// goroutine get to run and arm the timer, which nothing stops any more, and
// MaxShutdown later it reports a handler that returned long ago. So arm and
// disarm share a lock and a flag: an arm after the disarm does nothing, and
// a timer armed before it is stopped, or waited for if it already fired.
type watchdog struct {
	m  *Member
	sl *slot

	mu       sync.Mutex
	returned bool          // the handler has returned: never arm, never act
	timer    *time.Timer   // armed at the handoff's cancellation
	fired    chan struct{} // closed when the timer's function has returned
}

// arm starts the timer if the handler is being handed off and has not
// returned yet.
func (w *watchdog) arm() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.returned || w.sl.mode.Load() != modeHandoff {
		return
	}
	w.fired = make(chan struct{})
	w.timer = time.AfterFunc(w.m.cfg.MaxShutdown, w.expire)
}

// expire runs MaxShutdown after the handoff began.
func (w *watchdog) expire() {
	defer close(w.fired)
	w.mu.Lock()
	returned := w.returned
	w.mu.Unlock()
	if returned || w.sl.mode.Load() != modeHandoff {
		return
	}
	m, p := w.m, w.sl.claim.Partition
	if m.cfg.ForceHandoff {
		m.log.Error("handler did not return within MaxShutdown; releasing anyway (ForceHandoff)", "partition", p)
		m.release(w.sl)
		return
	}
	m.log.Error("handler did not return within MaxShutdown; keeping the partition until it does", "partition", p, "max_shutdown", m.cfg.MaxShutdown)
}

// disarm is called once the handler has returned, before the partition is
// released. It returns after any forced release the timer began, so that
// the partition's goroutine waits for it.
func (w *watchdog) disarm() {
	w.mu.Lock()
	w.returned = true
	t, fired := w.timer, w.fired
	w.mu.Unlock()
	if t != nil && !t.Stop() {
		<-fired
	}
}

// callHandler runs the handler, turning a panic into an error so one bad
// partition does not take the process down with partitions still held.
func (m *Member) callHandler(c *Claim) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panicked: %v", r)
		}
	}()
	return m.cfg.Handler(c)
}

// release gives the partition up in the store (once).
func (m *Member) release(sl *slot) {
	if !sl.released.CompareAndSwap(false, true) {
		return
	}
	// Released through the member's run context, not the session's (already
	// cancelled for the handoff): the store still fences it by epoch.
	if m.cfg.Gate.wait(m.runCtx) != nil {
		return
	}
	ctx, cancel := context.WithTimeout(m.runCtx, m.cfg.RenewTimeout)
	defer cancel()
	var err error
	if sl.mode.Load() == modeGiveBack {
		err = m.st.GiveBack(ctx, m.cfg.Group, sl.claim.Partition, sl.sess.id, sl.claim.Epoch)
	} else {
		err = m.st.Release(ctx, m.cfg.Group, sl.claim.Partition, sl.sess.id, sl.claim.Epoch)
	}
	if err != nil && !errors.Is(err, store.ErrNotOwner) {
		m.log.Warn("release failed; the partition frees when the session ends", "partition", sl.claim.Partition, "err", err)
	}
}
