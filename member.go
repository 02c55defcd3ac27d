package herd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"herd/balance"
	"herd/store"
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

	leaveOnce sync.Once
	leaveCh   chan struct{} // closed by Leave
	done      chan struct{} // closed when every goroutine has returned

	wake     chan struct{} // coalesced "re-read the group" signal
	slotDone chan *slot    // a partition's goroutine finished
	errMu    sync.Mutex
	err      error // why the member stopped, for Leave/Err

	// Owned by the reconcile loop: checkpoints to put back after a session
	// loss, and until when record-less partitions are left alone.
	restores  []store.Ownership
	holdFresh time.Time
	lastParts []store.Partition // the last non-empty partition set seen
	sessions  map[string]bool   // live sessions at the last reconcile
	joinedAt  time.Time         // when a new session was last seen

	mu    sync.Mutex
	owned map[string]uint64 // partitions with a running handler -> epoch
	sess  string            // current session id, "" if none
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
}

// slot modes, read by a partition's goroutine after its context is cancelled.
const (
	modeRun     int32 = iota // owned and running
	modeHandoff              // handing off: release after the handler returns
	modeLost                 // lost: return without releasing
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
	m := &Member{
		cfg:      cfg,
		st:       st,
		log:      cfg.Logger.With("group", cfg.Group, "member", cfg.Member),
		runCtx:   runCtx,
		stop:     stop,
		leaveCh:  make(chan struct{}),
		done:     make(chan struct{}),
		wake:     make(chan struct{}, 1),
		slotDone: make(chan *slot),
		owned:    map[string]uint64{},
	}
	sess, err := m.openSession()
	if err != nil {
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
	m.leaveOnce.Do(func() { close(m.leaveCh) })
	select {
	case <-m.done:
		if err := m.Err(); err != nil && !errors.Is(err, ErrLeft) {
			return err
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("herd: leave %q: still waiting for handlers of %v to return: %w",
			m.cfg.Group, m.Owned(), ctx.Err())
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

// Owned lists the partitions whose handlers are running, sorted.
func (m *Member) Owned() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.owned))
	for p := range m.owned {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// SetPartitions replaces the group's partition set for every member.
func (m *Member) SetPartitions(ctx context.Context, ps []store.Partition) error {
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

// openSession opens a session and starts its renewal goroutine.
func (m *Member) openSession() (*session, error) {
	if err := m.cfg.Gate.wait(m.runCtx); err != nil {
		return nil, err
	}
	sent := time.Now()
	ctx, cancel := context.WithTimeout(m.runCtx, m.cfg.RenewTimeout)
	id, err := m.st.OpenSession(ctx, m.cfg.Group, m.cfg.Member, m.cfg.Weight, m.cfg.SessionTTL)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("open session: %w", err)
	}
	sctx, scancel := context.WithCancelCause(m.runCtx)
	s := &session{id: id, ctx: sctx, cancel: scancel, renew: make(chan struct{})}
	m.mu.Lock()
	m.sess = id
	m.mu.Unlock()
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
		err := m.st.KeepAlive(ctx, m.cfg.Group, s.id, m.cfg.SessionTTL)
		cancel()
		switch {
		case err == nil:
			lastSent = sent
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
			m.poke()
			for ev := range ch {
				if m.cfg.Gate.wait(m.runCtx) != nil {
					break
				}
				// Our own claims and releases need no re-read: the loop
				// already acts on them.
				if (ev.Kind == store.EventClaimed || ev.Kind == store.EventReleased) && ev.Session != "" && ev.Session == m.Session() {
					continue
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
		if errors.Is(cause, ErrSessionExpired) {
			// The store no longer knows the session: it may have lost its
			// data. Give the members that held partitions time to restore
			// their checkpoints before anyone claims a record-less one.
			m.holdFresh = time.Now().Add(m.cfg.SessionTTL / 2)
		}
		m.mu.Lock()
		clear(m.owned)
		m.sess = ""
		m.mu.Unlock()
		m.log.Warn("session lost; all partitions dropped", "session", sess.id, "cause", cause)
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
		if sess == nil && !leaving {
			m.restore()
			s, err := m.openSession()
			if err != nil {
				if m.runCtx.Err() != nil {
					finish(m.runCtx.Err())
					return
				}
				m.log.Warn("cannot open a session; retrying", "err", err)
				retryLater()
			} else {
				sess = s
				backoff = 20 * time.Millisecond
				m.poke()
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
			for _, sl := range slots {
				sl.mode.CompareAndSwap(modeRun, modeHandoff)
				sl.cancel()
			}
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
		case <-retry.C:
		}
		if leaving || sess == nil {
			continue
		}
		next, err := m.reconcile(sess, slots)
		if err != nil {
			if sess.ctx.Err() == nil && m.runCtx.Err() == nil {
				m.log.Warn("reconcile failed; retrying", "err", err)
			}
			retryLater()
		} else {
			backoff = 20 * time.Millisecond
		}
		if next > 0 {
			expiry.Reset(next)
		}
		poll.Reset(m.cfg.PollInterval)
	}
}

// reconcile reads the group, computes the target assignment and moves this
// member toward it: drops partitions it lost, hands off those the target
// gives to others, claims free ones the target gives it. It returns when to
// look again for an expiring session (0: no other session).
func (m *Member) reconcile(sess *session, slots map[string]*slot) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(sess.ctx, m.cfg.SessionTTL)
	defer cancel()
	snap, err := m.st.Snapshot(ctx, m.cfg.Group)
	if err != nil {
		return 0, fmt.Errorf("read group: %w", err)
	}
	if len(snap.Partitions) > 0 {
		m.lastParts = snap.Partitions
	}
	if len(m.restores) > 0 {
		m.restore() // some failed before this session opened
	}
	if !snap.Alive(sess.id) {
		// The store no longer knows us (expired, or it lost its data):
		// everything we run is no longer ours.
		sess.cancel(ErrSessionExpired)
		return 0, nil
	}
	alive := make(map[string]bool, len(snap.Sessions))
	members := make([]balance.Member, 0, len(snap.Sessions))
	var next time.Duration
	for _, s := range snap.Sessions {
		alive[s.ID] = true
		if !m.sessions[s.ID] {
			m.joinedAt = time.Now()
		}
		members = append(members, balance.Member{ID: s.ID, Weight: s.Weight})
		if s.ID != sess.id && (next == 0 || s.Remaining < next) {
			next = s.Remaining
		}
	}
	if next > 0 {
		// Look just after the store would expire it; never spin.
		next += max(m.cfg.SessionTTL/100, 5*time.Millisecond)
	}
	records := make(map[string]*store.Ownership, len(snap.Owners))
	owners := make(map[string]string, len(snap.Owners))
	for i := range snap.Owners {
		o := &snap.Owners[i]
		records[o.Partition] = o
		if o.Session != "" && alive[o.Session] {
			owners[o.Partition] = o.Session
		}
	}
	m.sessions = alive
	if wait := m.cfg.JoinSettle - time.Since(m.joinedAt); wait > 0 {
		// A member just joined: others may be joining with it. Wait for
		// the membership to settle so the fleet moves once.
		return wait, nil
	}
	parts := make([]balance.Partition, len(snap.Partitions))
	for i, p := range snap.Partitions {
		parts[i] = balance.Partition{ID: p.ID, Weight: p.Weight}
	}
	target := balance.Assign(balance.Input{Members: members, Partitions: parts, Owners: owners})

	// Partitions we run: keep, drop (lost) or hand off.
	for p, sl := range slots {
		if sl.sess != sess || sl.mode.Load() != modeRun {
			continue
		}
		rec := records[p]
		switch {
		case rec == nil || rec.Session != sess.id || rec.Epoch != sl.claim.Epoch:
			m.log.Warn("partition lost to another member", "partition", p, "epoch", sl.claim.Epoch)
			sl.mode.Store(modeLost)
			sl.cancel()
			m.unown(p)
		case target[p] != sess.id:
			m.log.Debug("handing off", "partition", p, "to", target[p])
			sl.mode.Store(modeHandoff)
			sl.cancel()
			m.unown(p)
		}
	}

	// Partitions the target gives us: claim the free ones, in a stable order.
	var want []string
	for p, owner := range target {
		if owner != sess.id || slots[p] != nil {
			continue
		}
		rec := records[p]
		if rec != nil && rec.Session != "" && alive[rec.Session] && rec.Session != sess.id {
			continue // still held: its owner hands it off, we are woken by the release
		}
		if rec == nil && time.Now().Before(m.holdFresh) {
			// Just after a session loss: the store may have lost its data
			// and the previous owner may be about to restore this record.
			wait := time.Until(m.holdFresh)
			if next == 0 || wait < next {
				next = wait
			}
			continue
		}
		want = append(want, p)
	}
	slices.Sort(want)
	for _, p := range want {
		o, err := m.st.Claim(ctx, m.cfg.Group, p, sess.id)
		switch {
		case err == nil:
			m.start(sess, slots, o)
		case errors.Is(err, store.ErrClaimed):
			// Someone got there first (their view differed); we will be
			// woken again when it changes.
		case errors.Is(err, store.ErrSessionExpired):
			sess.cancel(ErrSessionExpired)
			return 0, nil
		default:
			return next, fmt.Errorf("claim %q: %w", p, err)
		}
	}

	// Records the store says are ours but we do not run (a Claim whose reply
	// was lost) and the target gives to others: release them.
	for p, rec := range records {
		if rec.Session == sess.id && slots[p] == nil && target[p] != sess.id {
			if err := m.st.Release(ctx, m.cfg.Group, p, sess.id, rec.Epoch); err != nil && !errors.Is(err, store.ErrNotOwner) {
				return next, fmt.Errorf("release %q: %w", p, err)
			}
		}
	}
	return next, nil
}

// restore puts back, where the store has no record any more, the last
// checkpoint this member wrote for each partition of a lost session. Restore
// writes nothing where a record exists, so this is harmless when the store
// kept its data, and keeps checkpoints from going backwards when it did not.
func (m *Member) restore() {
	if len(m.restores) > 0 && len(m.lastParts) > 0 {
		// A store that lost its data lost the partition set too.
		ctx, cancel := context.WithTimeout(m.runCtx, m.cfg.RenewTimeout)
		snap, err := m.st.Snapshot(ctx, m.cfg.Group)
		if err == nil && len(snap.Partitions) == 0 {
			if err := m.st.SetPartitions(ctx, m.cfg.Group, m.lastParts); err == nil {
				m.log.Info("restored the partition set the store had lost", "partitions", len(m.lastParts))
			}
		}
		cancel()
	}
	keep := m.restores[:0]
	for _, r := range m.restores {
		ctx, cancel := context.WithTimeout(m.runCtx, m.cfg.RenewTimeout)
		err := m.st.Restore(ctx, m.cfg.Group, r.Partition, r.Epoch, r.Checkpoint)
		cancel()
		switch {
		case err == nil:
			m.log.Info("restored a checkpoint the store had lost", "partition", r.Partition, "epoch", r.Epoch)
		case errors.Is(err, store.ErrNotOwner), errors.Is(err, store.ErrInvalid):
		default:
			if m.runCtx.Err() == nil {
				keep = append(keep, r) // store unreachable: try again before the next session
			}
		}
	}
	m.restores = keep
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
	group, part, epoch := m.cfg.Group, o.Partition, o.Epoch
	sl.claim = &Claim{
		Partition: part,
		Epoch:     epoch,
		ctx:       hctx,
		m:         m,
		last:      o.Checkpoint,
		write: func(ctx context.Context, v []byte) error {
			return m.st.Checkpoint(ctx, group, part, epoch, v)
		},
	}
	slots[part] = sl
	m.mu.Lock()
	m.owned[part] = epoch
	m.mu.Unlock()
	go m.runSlot(sl)
}

// runSlot runs one partition's handler until its context is cancelled, then
// releases the partition if it is being handed off, and reports to the loop.
func (m *Member) runSlot(sl *slot) {
	c := sl.claim
	ctx := c.ctx
	var watchdog atomic.Pointer[time.Timer]
	defer func() {
		if t := watchdog.Load(); t != nil {
			t.Stop()
		}
		m.slotDone <- sl
	}()
	// Once cancelled for a handoff, warn (or force the release) if the
	// handler takes longer than MaxShutdown to return.
	stopWatch := context.AfterFunc(ctx, func() {
		if sl.mode.Load() != modeHandoff {
			return
		}
		watchdog.Store(time.AfterFunc(m.cfg.MaxShutdown, func() {
			if m.cfg.ForceHandoff {
				m.log.Error("handler did not return within MaxShutdown; releasing anyway (ForceHandoff)", "partition", c.Partition)
				m.release(sl)
				return
			}
			m.log.Error("handler did not return within MaxShutdown; keeping the partition until it does", "partition", c.Partition, "max_shutdown", m.cfg.MaxShutdown)
		}))
	})
	defer stopWatch()
	for {
		err := m.callHandler(c)
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
	if sl.mode.Load() == modeHandoff {
		m.release(sl)
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
	err := m.st.Release(ctx, m.cfg.Group, sl.claim.Partition, sl.sess.id, sl.claim.Epoch)
	if err != nil && !errors.Is(err, store.ErrNotOwner) {
		m.log.Warn("release failed; the partition frees when the session ends", "partition", sl.claim.Partition, "err", err)
	}
}
