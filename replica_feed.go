package herd

// The replica's feed: the goroutine that reads the group, then follows its
// log, queueing the entries for plan and waking the reconcile loop.

import (
	"context"
	"errors"
	"time"

	"github.com/herdhq/herd/store"
)

// changesPerRead bounds the entries one Changes call returns: a first
// placement of 100,000 partitions is read in ten calls.
const changesPerRead = 10 * store.MaxBatch

// readPace spaces a member's reads of the log: after one that returned
// entries it waits sessions x readPace, so the fleet reads about once per
// readPace whatever its size (a read costs Redis about 20 µs: 0.4 core).
const readPace = 50 * time.Microsecond

// freshWait and maxFreshWait bound the feed's first call to the log after
// a read of the group (replica.fresh), doubled while the store is late.
const (
	freshWait    = 150 * time.Millisecond
	maxFreshWait = 16 * freshWait
)

// firstWait bounds the first call to the log after a read of the group
// that took took: as long as the read, within [freshWait, min(5 x settle,
// ttl4)]. Members joining together open their sessions during each other's
// reads, longer than JoinSettle on a large group: one that planned before
// they showed would claim more than its share.
func firstWait(took, settle, ttl4 time.Duration) time.Duration {
	if settle <= 0 {
		return freshWait
	}
	return max(freshWait, min(took, 5*settle, ttl4))
}

// feed is feedLoop's own state.
type feed struct {
	m          *Member
	r          *replica
	backoff    time.Duration  // the pause after a failure
	first      time.Duration  // bounds the first call after a read (firstWait); doubles when the store is late
	settleCall bool           // the copy is not fresh because a session opened (not because of a read)
	spare      []store.Change // the entries of the last call, which nothing holds any more (see changesInto)
}

// changesInto is a store whose Changes can decode the entries into the
// caller's list (redisstore's ChangesInto; faultstore's passes it on).
// The feed passes back the entries of its last call once it has applied
// them and nothing holds them (spareOf), and the next call writes over
// them: a call returns up to changesPerRead entries, 1.9 MB of
// store.Change, which were fresh memory each time otherwise. Following a
// placement of 99,000 claims took 118 bytes and 479 ns of CPU a change
// where it took 291 and 628 (BenchmarkFollowPlacementRedis, medians of 5).
type changesInto interface {
	ChangesInto(ctx context.Context, group string, after store.Version, max int, dst []store.Change) ([]store.Change, store.Version, error)
}

// logCall is one call to the log: what it asked, and how it was answered.
type logCall struct {
	read      bool // a read of the group was made just before
	after     store.Version
	firstCall bool // the first call since the copy was fresh
	sessions  int  // live sessions in the copy, for readPace
	began     time.Time
	cs        []store.Change
	kinds     kindSet // the kinds of cs's entries
	err       error
	cancelled bool // by resync, or the member stopping
	atEnd     bool // the call read the log to its end
	late      bool // the store did not answer within the first call's bound
	asked     bool // a read of the group was asked for meanwhile
}

// kindSet is a set of kinds of log entries, a bit each (kinds from 31 on
// share the top bit: has may say yes for one absent, never no for one
// present). Taken of each answer in one pass, it lets the steps that look
// for one kind skip their pass over the entries (10,000, 1.9 MB, per
// answer in a placement).
type kindSet uint32

func kindBit(k store.ChangeKind) kindSet { return 1 << min(uint(k), 31) }

func (s kindSet) has(k store.ChangeKind) bool { return s&kindBit(k) != 0 }

// kindsOf returns the kinds of the entries cs.
func kindsOf(cs []store.Change) kindSet {
	var s kindSet
	for i := range cs {
		s |= kindBit(cs[i].Kind)
	}
	return s
}

// feedLoop keeps the replica up to date until the member stops: it reads
// the group when asked to, and otherwise follows the log, waking the
// reconcile loop after each batch. run starts and waits for it.
func (m *Member) feedLoop() {
	f := &feed{m: m, r: &m.rep, backoff: firstBackoff, first: freshWait}
	for m.runCtx.Err() == nil {
		if m.cfg.gate.Wait(m.runCtx) != nil {
			return
		}
		read := f.readDue()
		if read && !f.readGroup() {
			f.pause()
			continue
		}
		if !f.follow(read) {
			return
		}
	}
}

// pause waits after a failure, the back-off doubling up to RenewInterval,
// unless a read is asked for meanwhile: it is made at once.
func (f *feed) pause() {
	if f.wait(f.backoff) {
		f.backoff = firstBackoff
		return
	}
	f.backoff = min(2*f.backoff, f.m.cfg.RenewInterval)
}

// wait waits d (spacing reads, or a back-off), and reports true if a read
// asked for ended it first.
func (f *feed) wait(d time.Duration) bool {
	if d <= 0 {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-f.m.runCtx.Done():
	case <-t.C:
	case <-f.r.wakeFeed:
		return true
	}
	return false
}

// readDue reports whether the group is to be read: no copy, or asked.
func (f *feed) readDue() bool {
	r := f.r
	r.mu.Lock()
	defer r.mu.Unlock()
	read := r.work == nil || r.readAsked
	// One asked during this read sets it again: it may need later writes.
	r.readAsked = false
	return read
}

// readGroup reads the group into the copy, and reports whether it did.
func (f *feed) readGroup() bool {
	m, r := f.m, f.r
	base := m.writes.Load() // writes completed before the read began are in it
	// A large group's read is long, and one given up starts over: give it the TTL.
	ctx, cancel := context.WithTimeout(m.runCtx, m.cfg.SessionTTL)
	began := time.Now()
	snap, err := m.st.Snapshot(ctx, m.cfg.Group)
	cancel()
	took := time.Since(began)
	if err == nil {
		// The read a member makes as it joins costs seconds on a busy host.
		m.log.Debug("read the group", "took", took.Round(time.Millisecond), "records", len(snap.Owners), "sessions", len(snap.Sessions))
	}
	r.mu.Lock()
	if err == nil {
		// contested is kept: a broken record may look free in this read too.
		r.work, r.base, r.err, r.distrusted = sortedCopy(snap), base, nil, false
		r.layout++
		r.sessionNewsAt(time.Now(), true)
		r.target, r.fresh, r.toClaim = nil, false, nil
		r.forgetUnchecked()
		f.first = firstWait(took, m.cfg.JoinSettle, m.cfg.SessionTTL/4)
		f.settleCall = false // the first call after a read waits first
		r.dropPending()
		r.inPlan = false
	} else {
		r.readAsked = true
		if m.runCtx.Err() == nil {
			r.err = err
		}
	}
	r.mu.Unlock()
	m.wakeLoop()
	return err == nil
}

// follow makes one call to the log and takes its answer. It reports false
// if the member stops.
func (f *feed) follow(read bool) bool {
	m, r := f.m, f.r
	c := logCall{read: read}
	r.mu.Lock()
	if r.readAsked || r.work == nil {
		r.mu.Unlock()
		return true // the read first
	}
	ctx, cancel := context.WithCancel(m.runCtx)
	c.after, c.firstCall, c.sessions = r.version(), !r.fresh, len(r.work.Sessions)
	r.cancel = cancel
	r.mu.Unlock()
	f.call(ctx, &c)
	cancel()
	if f.take(&c) {
		m.wakeLoop() // plan waits for it
	}
	f.takeRequests(&c)
	f.spare = f.spareOf(c.cs)
	return f.pace(&c)
}

// spareOf returns cs, the entries of the call just taken, for the next
// call to decode into if nothing holds them any more: applied already
// (none of them queued), and not kept for setTarget to check (unchecked).
// Else nil. The copy keeps only the entries' strings, never the entries.
// A list of fewer than MaxBatch entries is let go too: the log is at rest
// or nearly, and a member at rest keeps no list (and no strings of the
// reads it decoded) between its calls.
func (f *feed) spareOf(cs []store.Change) []store.Change {
	if len(cs) < store.MaxBatch {
		return nil
	}
	r := f.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.npending > 0 {
		return nil // cs may be among them
	}
	for _, u := range r.unchecked {
		if len(u) > 0 && &u[0] == &cs[0] {
			return nil
		}
	}
	return cs[:0]
}

// call calls the log (Changes) from c.after, and notes how it answered.
func (f *feed) call(ctx context.Context, c *logCall) {
	m := f.m
	cctx, ccancel := ctx, context.CancelFunc(func() {})
	if c.firstCall {
		// Plan waits for it (fresh): bounded by first, and after a
		// session opened by JoinSettle (plan waits that long anyway).
		bound := f.first
		if f.settleCall && m.cfg.JoinSettle > 0 {
			bound = min(f.first, max(m.cfg.JoinSettle, 10*time.Millisecond))
		}
		cctx, ccancel = context.WithTimeout(ctx, bound)
	}
	defer ccancel()
	f.settleCall = false
	c.began = time.Now()
	if st, ok := m.st.(changesInto); ok && f.spare != nil {
		c.cs, _, c.err = st.ChangesInto(cctx, m.cfg.Group, c.after, changesPerRead, f.spare)
	} else {
		c.cs, _, c.err = m.st.Changes(cctx, m.cfg.Group, c.after, changesPerRead)
	}
	f.spare = nil // the store's now, and c.cs's
	c.kinds = kindsOf(c.cs)
	c.cancelled = ctx.Err() != nil // by resync, or the member stopping
	// Fewer entries than asked for: the call read the log to its end.
	c.atEnd = c.err == nil && !c.cancelled && len(c.cs) < changesPerRead
	// A store answers a call at rest by its deadline with no error; one
	// cut by the deadline was not answered in time (busy with the joining
	// members' reads): it does not make the copy fresh, and the next may
	// take twice as long, up to maxFreshWait (a backend that answers a
	// deadline with its error).
	c.late = c.firstCall && c.err != nil && cctx.Err() != nil && !c.cancelled
	if c.late {
		if f.first < maxFreshWait {
			f.first = min(2*f.first, maxFreshWait)
		} else {
			c.late, c.err = false, nil
		}
	}
}

// take applies the answer of call c to the replica, and reports whether
// plan is to be woken: the copy became fresh, or a contested claim is
// left unexplained.
func (f *feed) take(c *logCall) (wake bool) {
	m, r := f.m, f.r
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cancel = nil
	// Any answer counts, an error too, but not a late one.
	freshNow := !c.cancelled && !r.fresh && !c.late
	if freshNow {
		r.fresh = true
	}
	c.asked = r.readAsked || r.work == nil
	switch {
	case c.asked || m.runCtx.Err() != nil: // the read first
	case c.err == nil && len(c.cs) > 0:
		if r.version() != c.after {
			break // unreachable: only this goroutine queues entries
		}
		f.queue(c.cs, c.kinds)
	case errors.Is(c.err, store.ErrVersionGone):
		r.readAsked = true
		r.goneAt = time.Now()
		// Kept unless none: an emptied store's copy does not replace them.
		if free := r.lostLoads(m.cfg.Member); len(free) > 0 {
			r.freeLoads = free
		}
	}
	// A claim contested before this call whose entry has not come (queue
	// forgot those it explains): plan reads the group anew (contestWait).
	explain := false
	if c.atEnd {
		explain = r.reached.Before(r.lastContest) && !c.began.Before(r.lastContest) && len(r.contested) > 0
		r.reached = c.began
		if explain {
			r.target = nil // plan in full: see contestedSince
		}
	}
	return freshNow || explain
}

// queue queues the entries cs (of kinds) for plan (or applies them, if
// many are queued), and checks them against the target. r.mu is held.
func (f *feed) queue(cs []store.Change, kinds kindSet) {
	r := f.r
	r.pending = append(r.pending, cs)
	r.npending += len(cs)
	r.loadsQueued = r.loadsQueued || kinds.has(store.LoadsReported)
	if kinds.has(store.SessionOpened) {
		// A busy store may log the last joining sessions later than
		// JoinSettle after the first: the copy is fresh again once the
		// log has answered one more call.
		r.sessionNewsAt(time.Now(), false)
		r.fresh = false
		f.settleCall = true
	}
	// The queue is applied once it holds as many entries as the group has
	// records or partitions (a pass over the records; its memory stays of
	// the copy's order), or a batch while plan does not hold the copy (in
	// place, about a microsecond an entry), so that the entries a target
	// lets pass do not delay the next full plan. Fewer are only checked.
	w := r.work
	if r.npending >= max(len(w.Owners), len(w.Partitions), changesPerRead) || (!r.inPlan && r.npending >= store.MaxBatch) {
		r.applyPending(true)
	} else {
		r.checkTarget(cs)
	}
	if len(r.contested) == 0 {
		return // the common case: nothing to look up per entry
	}
	for _, c := range cs {
		if c.Partition != "" {
			delete(r.contested, c.Partition)
		} else if c.Kind == store.PartitionsSet {
			clear(r.contested)
		}
	}
}

// pace waits as the answer of call c asks before the next call: not at
// all when more entries wait, readPace per session after entries, a
// back-off after a failure. It reports false if the member stops.
func (f *feed) pace(c *logCall) bool {
	m := f.m
	if c.err == nil {
		f.backoff = firstBackoff
	}
	switch {
	case m.runCtx.Err() != nil:
		return false
	case c.err == nil && len(c.cs) == changesPerRead:
		// More are waiting: plan once caught up, not on a stale view.
	case c.err == nil && len(c.cs) > 0:
		if c.kinds == kindBit(store.LoadsReported) { // load reports alone
			// The fleet's reports come together: one more read, one plan.
			f.wait(max(time.Duration(c.sessions)*readPace, loadGather))
			m.wakeLoop()
			break
		}
		m.wakeLoop()
		f.wait(time.Duration(c.sessions) * readPace)
	case c.read && errors.Is(c.err, store.ErrVersionGone):
		// Gone right after a read (snapshots without their version): back off.
		f.pause()
	case c.err != nil && !c.asked && !errors.Is(c.err, store.ErrVersionGone):
		m.log.Debug("reading the group's log failed; retrying", "err", c.err)
		f.pause()
	}
	return true
}
