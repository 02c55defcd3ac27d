package herd

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/herdhq/herd/store"
)

// changesPerRead bounds the entries one Changes call returns: a first
// placement of 100,000 partitions is read in ten calls.
const changesPerRead = 10 * store.MaxBatch

// replica is the member's copy of the group: one Snapshot, taken when a
// session opens (and again whenever the log cannot be continued, or the
// store contradicts the copy), then kept up to date by the feed goroutine
// (feedLoop), which applies the group's log to it. plan reads it instead of
// reading the group from the store, so a rebalance costs the store the
// entries of its changes, not one read of every record per member per
// change.
//
// The feed applies batches to work, its own copy, under mu; plan gets a
// copy of work (view) that nothing changes afterwards, so it never sees a
// half-applied batch and the feed never waits for a plan. The copy costs
// one copy of the records per plan, which reads them all anyway; the
// partition set and the malformed list are shared, as Apply replaces the
// first whole and never touches the second.
type replica struct {
	mu    sync.Mutex
	work  *store.Snapshot // nil until the first read
	base  uint64          // Member.writes when the read of work's snapshot began
	view  *store.Snapshot // the last copy given to plan, nil when work changed since
	err   error           // why the last read failed, nil after one succeeded
	again bool            // read the group anew (the copy is stale or diverged)
	// distrusted: plan must not use the copy until a read succeeds (the
	// store showed that its keys broke in a way the log cannot show).
	distrusted bool
	// cancel ends the feed's blocked Changes call, so that a read asked
	// for is made at once.
	cancel context.CancelFunc
	// contested: partitions a claim failed for (ErrClaimed, ErrCorrupt)
	// although the copy showed them free, and when. They are not claimed
	// again until an entry about them is applied, or for RenewInterval;
	// see plan.
	contested map[string]time.Time
}

// current returns the copy for plan (nil if the group was never read), the
// writes it is known to show (see Member.writes), and the error of the
// last read if it failed.
func (r *replica) current() (*store.Snapshot, uint64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.work == nil || r.distrusted {
		return nil, 0, r.err
	}
	if r.view == nil {
		v := *r.work
		v.Sessions = append([]store.SessionInfo(nil), r.work.Sessions...)
		v.Owners = append([]store.Ownership(nil), r.work.Owners...)
		r.view = &v
	}
	return r.view, r.base, r.err
}

// resync asks the feed to read the group anew, at once.
func (r *replica) resync() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.again = true
	if r.cancel != nil {
		r.cancel()
	}
}

// distrust asks the feed to read the group anew, and plan to wait for it.
func (r *replica) distrust() {
	r.mu.Lock()
	r.distrusted = true
	r.mu.Unlock()
	r.resync()
}

// broken reports whether the copy shows something broken by hand, which
// the log cannot show the repair of: a malformed record, a claim the store
// refused although the copy showed the partition free, or a read that
// failed.
func (r *replica) broken() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.work == nil || r.err != nil || r.distrusted || len(r.work.Malformed) > 0 || len(r.contested) > 0
}

// contest notes that a claim of p failed although the copy showed it free.
func (r *replica) contest(p string, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.contested == nil {
		r.contested = map[string]time.Time{}
	}
	r.contested[p] = now
}

// contestedSince returns when a claim of p failed, if the copy has shown
// nothing new about p since.
func (r *replica) contestedSince(p string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.contested[p]
	return t, ok
}

// uncontest forgets that a claim of p failed.
func (r *replica) uncontest(p string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.contested, p)
}

// feedLoop keeps the replica up to date until the member stops: it reads
// the group when asked to (or when the log cannot be continued), and
// otherwise waits on Changes and applies what it returns, waking the
// reconcile loop after each batch. It is started and waited for by run.
func (m *Member) feedLoop(done chan<- struct{}) {
	defer close(done)
	r := &m.rep
	backoff := 20 * time.Millisecond
	pause := func() {
		select {
		case <-m.runCtx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, m.cfg.RenewInterval)
	}
	for m.runCtx.Err() == nil {
		if m.cfg.Gate.wait(m.runCtx) != nil {
			return
		}
		r.mu.Lock()
		read := r.work == nil || r.again
		// A read asked for while this one is under way may need writes
		// completed after it began: it sets again, and is made next.
		r.again = false
		r.mu.Unlock()
		if read {
			// Writes this member completed before the read began are in
			// what it returns (see Member.writes).
			base := m.writes.Load()
			// A read of a large group is long (100,000 records: about
			// 0.1 s of a Redis core), and one given up on is read again
			// from the start: give it the TTL, not a renewal's time.
			ctx, cancel := context.WithTimeout(m.runCtx, m.cfg.SessionTTL)
			snap, err := m.st.Snapshot(ctx, m.cfg.Group)
			cancel()
			r.mu.Lock()
			if err == nil {
				// contested is kept: a record broken by hand (ErrCorrupt)
				// may look free in the new read too.
				r.work, r.base, r.view, r.err, r.distrusted = sortedCopy(snap), base, nil, nil, false
			} else {
				r.again = true
				if m.runCtx.Err() == nil {
					r.err = err
				}
			}
			r.mu.Unlock()
			m.poke()
			if err != nil {
				pause()
				continue
			}
		}
		ctx, cancel := context.WithCancel(m.runCtx)
		r.mu.Lock()
		after := r.work.Version
		r.cancel = cancel
		again := r.again
		r.mu.Unlock()
		if again {
			cancel()
			continue
		}
		cs, _, err := m.st.Changes(ctx, m.cfg.Group, after, changesPerRead)
		cancel()
		r.mu.Lock()
		r.cancel = nil
		asked := r.again
		switch {
		case asked || m.runCtx.Err() != nil:
			// A read was asked for (which cancelled the call): make it.
		case err == nil && len(cs) > 0:
			if r.work.Version != after {
				break // unreachable: only this goroutine changes work
			}
			if aerr := r.work.ApplyAll(cs); aerr != nil {
				m.log.Warn("the group's log does not fit the member's copy; reading the group anew", "err", aerr)
				r.again = true
			}
			r.view = nil
			for _, c := range cs {
				if c.Partition != "" {
					delete(r.contested, c.Partition)
				} else if c.Kind == store.PartitionsSet {
					clear(r.contested)
				}
			}
		case errors.Is(err, store.ErrVersionGone):
			r.again = true
		}
		// A log that cannot be continued from a read just made (a store
		// whose snapshots lack their version) is read again with back-off.
		gone := errors.Is(err, store.ErrVersionGone) && read
		r.mu.Unlock()
		switch {
		case m.runCtx.Err() != nil:
			return
		case err == nil && len(cs) == changesPerRead:
			// More entries are waiting: plan on the replica once it has
			// caught up, not on a view that is already stale.
			backoff = 20 * time.Millisecond
		case err == nil && len(cs) > 0:
			backoff = 20 * time.Millisecond
			m.poke()
		case gone:
			pause()
		case err != nil && !asked && !errors.Is(err, store.ErrVersionGone):
			m.log.Debug("reading the group's log failed; retrying", "err", err)
			pause()
		case err == nil:
			backoff = 20 * time.Millisecond
		}
	}
}

// sortedCopy returns a copy of snap that Apply may change, its lists sorted
// by id without duplicates as the store contract promises (a backend that
// breaks the promise costs a sorted copy; of duplicate records the last is
// kept, as plan does).
func sortedCopy(snap *store.Snapshot) *store.Snapshot {
	c := snap.Clone()
	if !slices.IsSortedFunc(c.Sessions, func(a, b store.SessionInfo) int { return strings.Compare(a.ID, b.ID) }) {
		slices.SortStableFunc(c.Sessions, func(a, b store.SessionInfo) int { return strings.Compare(a.ID, b.ID) })
	}
	c.Sessions = slices.CompactFunc(c.Sessions, func(a, b store.SessionInfo) bool { return a.ID == b.ID })
	if !slices.IsSortedFunc(c.Partitions, func(a, b store.Partition) int { return strings.Compare(a.ID, b.ID) }) {
		slices.SortStableFunc(c.Partitions, func(a, b store.Partition) int { return strings.Compare(a.ID, b.ID) })
	}
	c.Partitions = slices.CompactFunc(c.Partitions, func(a, b store.Partition) bool { return a.ID == b.ID })
	for i := 1; i < len(c.Owners); i++ {
		if c.Owners[i-1].Partition >= c.Owners[i].Partition {
			c.Owners = sortedOwners(c.Owners)
			break
		}
	}
	return c
}

// ownRecordsIntact reads the records of the partitions this member runs
// (Store.Records, MaxBatch at a time) and reports whether each still names
// this session at the epoch it runs. One edited by hand (broken, deleted
// or rewritten), which the log cannot show, makes the member read the
// whole group, which drops the partition (and lists a broken record as
// malformed). A failed read reports true: the next check, or a write,
// tells.
func (m *Member) ownRecordsIntact(sess *session) bool {
	m.mu.Lock()
	own := make(map[string]uint64, len(m.owned))
	for p, e := range m.owned {
		own[p] = e
	}
	m.mu.Unlock()
	ids := slices.Sorted(maps.Keys(own))
	for len(ids) > 0 {
		batch := ids[:min(len(ids), store.MaxBatch)]
		ids = ids[len(batch):]
		ctx, cancel := context.WithTimeout(sess.ctx, m.cfg.RenewTimeout)
		recs, err := m.st.Records(ctx, m.cfg.Group, batch)
		cancel()
		if err != nil {
			return !errors.Is(err, store.ErrCorrupt)
		}
		if len(recs) != len(batch) {
			return false // missing or malformed
		}
		for _, r := range recs {
			if e, ok := own[r.Partition]; ok && (r.Session != sess.id || r.Epoch != e) {
				// Another claim's entry may be on its way: the copy shows
				// it soon, and a read costs one more read at worst.
				return false
			}
		}
	}
	return true
}
