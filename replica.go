package herd

import (
	"context"
	"sync"
	"time"

	"github.com/herdhq/herd/store"
)

// replica is the member's copy of the group: one Snapshot, read when a
// session opens (or the log cannot be continued, or the store contradicts
// the copy), then kept up to date by the group's log (replica_feed.go), so
// that a rebalance costs the store its entries, not a read of every record
// per member. plan applies the queued entries as it takes the copy and uses
// it in place until release: a burst costs one pass over the records per plan.
type replica struct {
	mu          sync.Mutex
	work        *store.Snapshot  // nil until the first read
	pending     [][]store.Change // the entries after work.Version not applied yet, as Changes returned them
	npending    int
	loadsQueued bool                          // a queued entry publishes loads (loadOf scans the queue only then)
	loads       equalLoads                    // whether the copy's loads and those checked against the target are all equal
	inPlan      bool                          // plan is using work (current .. release)
	layout      uint64                        // counts the reads of the group work was made from (see hintExact)
	base        uint64                        // Member.writes when the read of work's snapshot began
	err         error                         // why the last read failed, nil after one succeeded
	readAsked   bool                          // read the group anew (the copy is stale or diverged)
	goneAt      time.Time                     // when the log last answered ErrVersionGone (see lossState.logMark)
	freeLoads   []store.Load                  // the copy's lostLoads as the log went gone (noteLostLoads takes them)
	distrusted  bool                          // plan waits for a read to succeed (the store broke in a way the log cannot show)
	cancel      context.CancelFunc            // ends the feed's call to the log, so that a read asked for is made at once
	wakeFeed    chan struct{}                 // ends the feed's pause after a failure, likewise
	contested   map[string]time.Time          // partitions free in the copy a claim failed for (ErrClaimed, ErrCorrupt), and when
	reached     time.Time                     // when the last call that read the log to its end began: every entry before is queued
	lastContest time.Time                     // when the latest claim was contested
	log         func(msg string, args ...any) // a warning about a diverged copy
	target      *planTarget                   // of the last full plan (nil: none, plan in full; target.go)
	offTarget   bool                          // an entry since target was set was not progress toward it
	toClaim     []string                      // released toward this member since target was set (onTargetRunning)
	unchecked   [][]store.Change              // batches applied while no target was set (a plan under way), for setTarget; emptied over changesPerRead entries
	nunchecked  int
	targetFirst time.Time     // when the first entry checked against target arrived (zero: none yet)
	targetLast  time.Time     // when the last one did
	openedAt    time.Time     // when the feed last brought news of a session opened (JoinSettle counts from it)
	newsGap     time.Duration // the longest wait between two such news, for a first placement (startGap)
	loggedAt    time.Time     // when the log last brought news of a session opened (reads left out)
	joinGap     time.Duration // the longest wait between two such news of the current burst (0: none), for joinQuiet
	burstWait   time.Duration // the longest wait between two news of one burst (joinQuiet's limit)
	fresh       bool          // the log answered since the last read (or session opened): plan waits for it, as joiners open sessions during reads
}

func (r *replica) isFresh() bool { r.mu.Lock(); defer r.mu.Unlock(); return r.fresh }

// current returns the copy for plan, every entry received applied (nil if
// none, or being read anew), the writes it shows (Member.writes) and the
// last read's error. Nothing changes the copy until release.
func (r *replica) current() (*store.Snapshot, uint64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.work == nil || r.distrusted || !r.applyPending(false) {
		return nil, 0, r.err
	}
	if r.target == nil {
		r.forgetUnchecked() // in the copy plan is given: nothing to check
	}
	r.inPlan = true
	return r.work, r.base, r.err
}

// awaitLog has plan wait for the log to answer a call begun after now
// (the copy is not fresh until then): the feed's call under way, which may
// have begun before what was just logged, is ended, and the next, bounded
// as a first call, reads it.
func (r *replica) awaitLog() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.work == nil {
		return // the read to come is followed by such a call
	}
	r.fresh = false
	if r.cancel != nil {
		r.cancel()
	}
	select {
	case r.wakeFeed <- struct{}{}: // ends a pause after the cancelled call
	default:
	}
}

// layoutNow returns layout. Taken before current, it is that of the copy
// current returns or older (never newer: hintExact is then false).
func (r *replica) layoutNow() uint64 { r.mu.Lock(); defer r.mu.Unlock(); return r.layout }

// sessionNews returns when the feed last brought news of a session opened
// (openedAt), and the longest wait between two such news (newsGap).
func (r *replica) sessionNews() (time.Time, time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.openedAt, r.newsGap
}

// sessionNewsAt notes news of sessions opened at now: an entry, or a read
// of the group (read), which only restarts the wait. r.mu is held.
func (r *replica) sessionNewsAt(now time.Time, read bool) {
	if !read && !r.openedAt.IsZero() {
		r.newsGap = max(r.newsGap, now.Sub(r.openedAt))
	}
	if !read {
		// A burst is news each within burstWait of the one before.
		switch gap := now.Sub(r.loggedAt); {
		case r.loggedAt.IsZero() || gap > r.burstWait:
			r.joinGap = 0
		default:
			r.joinGap = max(r.joinGap, gap)
		}
		r.loggedAt = now
	}
	r.openedAt = now
}

// lastJoinGap returns the longest wait between two news of sessions
// opened that the log brought in the current burst (joinGap).
func (r *replica) lastJoinGap() time.Duration { r.mu.Lock(); defer r.mu.Unlock(); return r.joinGap }

// release hands the copy current returned back to the feed.
func (r *replica) release() { r.mu.Lock(); r.inPlan = false; r.mu.Unlock() }

// applyPending applies the queue to work (a copy if plan holds it), false if
// the copy is to be read anew. With checkLast, the last batch is checked
// against the target as it is applied (one record lookup). r.mu is held.
func (r *replica) applyPending(checkLast bool) bool {
	if r.npending == 0 {
		return true
	}
	if r.inPlan {
		r.work, r.inPlan = r.work.Clone(), false
	}
	var err error
	for k, cs := range r.pending {
		var seen func(store.Change, int)
		if a := r.target; checkLast && k == len(r.pending)-1 && a != nil && !r.offTarget {
			// Records these entries add are merged at the call's end:
			// until then, the copy's stay put.
			exact := r.hintExact(a)
			seen = func(c store.Change, rec int) {
				if !r.offTarget {
					ok, claim := r.progressOf(a, &c, rec, exact)
					r.noteProgress(c.Partition, ok, claim)
				}
			}
		}
		if err = r.work.ApplyAllFunc(cs, seen); err != nil {
			break
		}
		if seen != nil {
			r.reachedTarget(len(cs))
		}
		if r.target == nil {
			r.noteUnchecked(cs) // for the target of the plan under way
		}
	}
	r.dropPending()
	if err != nil {
		if r.log != nil {
			r.log("the group's log does not fit the member's copy; reading the group anew", "err", err)
		}
		r.work, r.readAsked = nil, true
		if r.cancel != nil {
			r.cancel()
		}
		return false
	}
	return true
}

// version is the point of the log the copy reached, queued entries
// included. r.mu is held.
func (r *replica) version() store.Version {
	if n := len(r.pending); n > 0 {
		last := r.pending[n-1]
		return last[len(last)-1].Version
	}
	return r.work.Version
}

// mark returns the point of the log the copy has reached (zero: none yet)
// and when the log last said it could not be continued (zero: never).
func (r *replica) mark() (store.Version, time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.work == nil {
		return store.Version{}, r.goneAt
	}
	return r.version(), r.goneAt
}

// dropPending empties the queue, letting its entries go. r.mu is held.
func (r *replica) dropPending() {
	clear(r.pending)
	r.pending, r.npending, r.loadsQueued = r.pending[:0], 0, false
}

// resync has the feed read the group anew at once: it cancels the feed's
// call to the log, or ends its pause after a failure.
func (r *replica) resync() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.readAsked = true
	if r.cancel != nil {
		r.cancel()
	}
	notify(r.wakeFeed)
}

// distrust asks the feed to read the group anew, and plan to wait for it.
func (r *replica) distrust() {
	r.mu.Lock()
	r.distrusted = true
	r.mu.Unlock()
	r.resync()
}

// broken reports whether the copy shows something broken by hand whose
// repair the log cannot show: a malformed record, or a failed read.
func (r *replica) broken() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.work == nil || r.err != nil || r.distrusted || len(r.work.Malformed) > 0
}

// epochOf is the epoch of p's record in the copy, queued entries included
// (the latest claim or restore of p); 0 if there is none.
func (r *replica) epochOf(p string) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.pending) - 1; i >= 0; i-- {
		cs := r.pending[i]
		for j := len(cs) - 1; j >= 0; j-- {
			if c := cs[j]; c.Partition == p && (c.Kind == store.Claimed || c.Kind == store.Restored) {
				return c.Epoch
			}
		}
	}
	if r.work == nil {
		return 0
	}
	if i, ok := searchRecord(r.work.Owners, p); ok {
		return r.work.Owners[i].Epoch
	}
	return 0
}
