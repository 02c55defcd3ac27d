package herd

// The plan: from the replica, the target assignment and what this member
// must claim, hand off, drop and release to reach it.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/herdhq/herd/balance"
	"github.com/herdhq/herd/store"
)

// reconcilePlan is what plan decided: the store calls left to make.
type reconcilePlan struct {
	next    time.Duration // when to look again (JoinSettle, a hold, a contested claim)
	held    bool          // next is for a hold (not only contested claims)
	expired bool          // the store no longer knows the session
	wait    bool          // the replica does not show the session yet: nothing to do
	onAim   bool          // no full plan: claim is what was released toward this member (aim.go)
	claim   []string      // partitions to claim, in ID order
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
	recPart  []int32           // per record of the snapshot (placeholders too): index of its partition, or -1
	target   []int32           // per partition: index in members of its target owner
	strays   []int32           // records of ours for partitions outside the set
	records  int               // records found (placeholders aside)
	marked   int               // records of partitions in the set with a GivenBack mark
	avoid    []int32           // per partition: index in members of the live session that gave it back, or -1 (avoidGivers)
	from     []store.Partition // the partition set parts was made from
	assigner balance.Assigner
}

var reconcileBufs = sync.Pool{New: func() any { return &reconcileBuf{sessIdx: map[string]int32{}} }}

// plan computes, from the replica, the target assignment, drops the
// partitions this member lost and starts handing off those the target
// gives to others (neither waits on the store), and returns what is left to
// claim and to release. The replica's copy is not kept.
func (m *Member) plan(ctx context.Context, sess *session, slots map[string]*slot) (reconcilePlan, error) {
	if pl, ok := m.planOnAim(sess, slots); ok {
		return pl, nil
	}
	var pl reconcilePlan
	prev := m.aim // its lists are reused: nobody else's once the replica's is dropped
	m.rep.dropAim()
	m.aim = nil
	m.plannedAt = time.Now()
	snap, base, err := m.rep.current()
	defer func() {
		if snap != nil {
			m.planGap = planGap(len(snap.Owners), time.Since(m.plannedAt), m.cfg.SessionTTL/40)
		}
	}()
	if pl, ok, err := m.planChecks(ctx, sess, snap, base, err); !ok {
		m.rep.release()
		return pl, err
	}
	defer m.rep.release()

	b := reconcileBufs.Get().(*reconcileBuf)
	defer reconcileBufs.Put(b)
	sessions, parts, owners := b.sorted(snap, &m.checkedParts)
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
	if b.records < m.lastRecords {
		// Records are never deleted: the store lost data (a failover to a
		// replica that missed the last writes may keep our session).
		m.log.Warn("ownership records vanished from the store: it lost data", "records", b.records, "before", m.lastRecords)
		m.holdAfterLoss(true)
	}
	m.lastRecords = b.records
	// Partitions we claimed that the replica does not show yet are ours:
	// the target must not move them for want of their entries.
	for p, sl := range slots {
		if sl.sess != sess || sl.mode.Load() != modeRun || base >= sl.seq {
			continue
		}
		if i, ok := partIndex(parts, p, &sl.at); ok && b.owner[i] != me {
			if r := b.rec[i]; r < 0 || owners[r].Epoch < sl.claim.Epoch {
				b.owner[i] = me
			}
		}
	}
	target, err := b.assigner.AssignSorted(b.members, b.parts, b.owner, b.target)
	if err != nil {
		return pl, fmt.Errorf("assign: %w", err) // unreachable: the input is sorted
	}
	b.target = target
	// Partitions given back (ErrGiveBack) go to another member than the
	// one that gave them back, while it lives (givenback.go).
	if b.marked > 0 { // join found marks: at rest, none (and the pass over the records is saved)
		b.avoid, _ = avoidGivers(b.members, b.parts, owners, b.rec, b.owner, target, b.sessIdx, b.avoid)
	}
	var recPart []int32 // the feed's hint into snap's records
	if sameSlice(owners, snap.Owners) {
		recPart = b.recPart
	}
	m.aim, m.aimAt = newAim(prev, sess.id, sessions, parts, target, recPart, m.cfg.RenewInterval), snap.Version

	// Partitions we run: keep, drop (lost) or hand off; the releases of
	// the handoffs are sent together.
	handed := m.rel.hold()
	defer handed()
	for p, sl := range slots {
		if sl.sess != sess || sl.mode.Load() != modeRun {
			continue
		}
		i, inSet := partIndex(parts, p, &sl.at)
		var rec *store.Ownership
		if inSet {
			if r := b.rec[i]; r >= 0 {
				rec = &owners[r] // b.rec leaves placeholders out
			}
		} else if r, ok := slices.BinarySearchFunc(owners, p, func(x store.Ownership, id string) int { return strings.Compare(x.Partition, id) }); ok && owners[r].Epoch > 0 {
			rec = &owners[r]
		}
		if (rec == nil || rec.Epoch < sl.claim.Epoch) && base < sl.seq {
			// Our claim is not in the replica yet: its entry is on its
			// way (or a new read, if the store lost it, will show that),
			// so the record says nothing of whether we lost it. If the
			// target gives the partition to another, hand it off now all
			// the same: the release is fenced by our claim's epoch, and
			// its entry follows the claim's in the log. Waiting for the
			// replica to show the claim left the partition where it was
			// until a later full plan: in herd bench --scenario large, a
			// member whose copy was seconds behind the placement's log
			// kept partitions the others waited for until its aim
			// expired (RenewInterval), and the placement took 12 s.
			if inSet && target[i] != me {
				m.step.handingOff(p)
				m.handOff(sl)
				m.unown(p)
			}
			continue
		}
		switch {
		case rec == nil || rec.Session != sess.id || rec.Epoch != sl.claim.Epoch:
			m.step.dropLost(p)
			if cp := sl.claim.restorePoint(); rec == nil && cp != nil {
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
			m.handOff(sl)
			m.unown(p)
		}
	}

	// Partitions the target gives us: claim the free ones, in ID order.
	now := time.Now()
	m.incoming = 0
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
		if sl := slots[p]; sl != nil {
			sl.claimOnceStopped(sess)
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
			// replica shows the release.
			m.incoming++
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
			pl.held = true
			continue
		}
		if at, ok := m.rep.contestedSince(p); ok {
			// A claim of it failed although the replica showed it free,
			// and the replica has shown nothing about it since: wait for
			// the entry that explains it. That entry was in the log before
			// the claim failed: if the feed has read the log to its end
			// since, and RenewInterval has passed, it is not coming (the
			// record was written by hand): read the group anew and claim
			// again. A replica still behind the log (its member busy, the
			// log long) is not stale, and reading the whole group would
			// only put it further behind; the feed wakes plan when it
			// reaches the end.
			wait := m.cfg.RenewInterval - now.Sub(at)
			if wait <= 0 && !m.rep.reachedSince(at) {
				wait = m.cfg.RenewInterval
			}
			if wait > 0 {
				if pl.next == 0 || wait < pl.next {
					pl.next = wait
				}
				continue
			}
			m.rep.uncontest(p)
			m.rep.resync()
		}
		// Free, or a record naming our session that we do not run (a
		// Claim whose reply was lost, a record a failover brought back):
		// Claim gives it a fresh epoch, so we never run the record's old one.
		pl.claim = append(pl.claim, p)
	}

	// Records the store says are ours but we do not run and the target
	// gives to others: release them (after the claims).
	for i, o := range b.owner {
		if o == me && target[i] != me && slots[parts[i].ID] == nil {
			r := &owners[b.rec[i]]
			if !m.releasedAlready(r.Partition, r.Epoch, true) {
				pl.release = append(pl.release, store.Ownership{Partition: r.Partition, Epoch: r.Epoch})
			}
		}
	}
	for _, j := range b.strays {
		if r := &owners[j]; slots[r.Partition] == nil && !m.releasedAlready(r.Partition, r.Epoch, true) {
			pl.release = append(pl.release, store.Ownership{Partition: r.Partition, Epoch: r.Epoch})
		}
	}
	if len(m.restores) > 0 || (len(snap.Partitions) == 0 && !snap.PartitionSetStored && len(m.lastParts) > 0) {
		// Restores the store did not answer (planChecks): no entry will
		// come to make plan try them again, so look again soon, as a
		// failed renewal is retried. A partition set not put back left
		// the member alone in a group with nothing to run until its next
		// read of the group (HERD_FAULT_SEED=162).
		retry := min(m.cfg.RenewInterval/4, 500*time.Millisecond)
		if pl.next == 0 || retry < pl.next {
			pl.next = retry
		}
		pl.held = true // no aim: the next plan is a full one
	}
	return pl, nil
}

// planOnAim is plan when every entry since the last full plan carried it
// out (aim.go): nothing to do but claim what was released toward this
// member since, as a full plan would. It reports false if a full plan is
// due: the aim is off or expired, restores are pending, or a hold after a
// loss of the store's data is under way (holdAfterLoss) and there is
// something to claim, which the full plan decides.
func (m *Member) planOnAim(sess *session, slots map[string]*slot) (pl reconcilePlan, ok bool) {
	now := time.Now()
	next, claims, ok := m.rep.onAim(sess.id, now)
	if !ok || len(m.restores) > 0 {
		return pl, false
	}
	claims = slices.DeleteFunc(claims, func(p string) bool {
		sl := slots[p]
		if sl != nil {
			sl.claimOnceStopped(sess)
		}
		return sl != nil
	})
	pl.next, pl.wait = next, true
	if len(claims) == 0 {
		return pl, true
	}
	if now.Before(m.holdFree) || now.Before(m.holdFresh) {
		return pl, false
	}
	slices.Sort(claims)
	pl.claim, pl.wait, pl.onAim = slices.Compact(claims), false, true
	m.incoming = max(0, m.incoming-len(pl.claim))
	return pl, true
}

// sorted returns the snapshot's sessions and partitions, each sorted by id
// without duplicates, as the store contract promises (join checks the
// records). A backend that breaks the promise costs a sorted copy, in which
// the first of duplicates is kept, as balance.Assign does. A partition set
// already checked (the same read-only slice, shared between snapshots; the
// member keeps it in *checked, not in the buffer, which the members of one
// process share) is not checked again.
func (b *reconcileBuf) sorted(snap *store.Snapshot, checked *[]store.Partition) ([]store.SessionInfo, []store.Partition, []store.Ownership) {
	ss, ps := snap.Sessions, snap.Partitions
	ss = sortedByID(ss, sessionID)
	if !sameSlice(ps, *checked) {
		*checked = nil
		ps = sortedByID(ps, partitionID)
		if sameSlice(ps, snap.Partitions) {
			*checked = ps
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
	b.recPart = resize(b.recPart, len(owners))
	b.strays = b.strays[:0]
	b.records, b.marked = 0, 0
	// stray consumes owners[j], which matches no partition.
	stray := func(j int) bool {
		if j > 0 && owners[j].Partition <= owners[j-1].Partition {
			return false
		}
		b.recPart[j] = -1
		if owners[j].Epoch > 0 {
			b.records++
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
		b.recPart[j] = int32(i)
		if owners[j].Epoch == 0 {
			j++ // a placeholder of the member's copy (withPlaceholders): no record
			continue
		}
		b.records++
		b.rec[i] = int32(j)
		if owners[j].GivenBack != "" {
			b.marked++
		}
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

// latest returns the later of a and b.
func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// planChecks is what plan checks on the copy snap (from replica.current,
// with its base and error) before it plans in full: ok false, with what to
// return, if it must not (the copy is not ready, this session has ended, or
// a member just joined and the membership is to settle first).
func (m *Member) planChecks(ctx context.Context, sess *session, snap *store.Snapshot, base uint64, err error) (pl reconcilePlan, ok bool, _ error) {
	if err != nil {
		return pl, false, fmt.Errorf("read group: %w", err)
	}
	if snap == nil || base < sess.seq || !m.rep.isFresh() {
		// The read that shows this session is under way; the feed wakes
		// the loop when it is done.
		pl.wait = true
		return pl, false, nil
	}
	m.corruptRepaired()
	m.reportMalformed(snap.Malformed)
	if len(snap.Partitions) > 0 || snap.PartitionSetStored {
		m.lastParts = snap.Partitions // follows a set emptied on purpose
	}
	// Restores that failed before this session opened, or a partition set
	// the store lost (put back even when no checkpoint is pending).
	lostSet := !snap.PartitionSetStored && len(snap.Partitions) == 0 && len(m.lastParts) > 0
	if (len(m.restores) > 0 || lostSet) && m.restore(ctx) {
		m.holdAfterLoss(true)
	}
	// A linear scan, not snap.Alive: that trusts the store's sort order,
	// which sorted (below) checks only later. The replica shows this
	// session (base >= sess.seq): if it lacks it, the log said the session
	// expired or was closed, or a new read of the group lacks it.
	if !slices.ContainsFunc(snap.Sessions, func(s store.SessionInfo) bool { return s.ID == sess.id }) {
		// The store no longer knows us (expired, or it lost its data):
		// everything we run is no longer ours.
		sess.cancel(ErrSessionExpired)
		pl.expired = true
		return pl, false, nil
	}
	if m.sessions == nil {
		m.sessions = map[string]bool{}
	}
	// The membership settles JoinSettle after the feed brought the last
	// session opened, not after plan first saw it: a plan that came late
	// (spaced by planGap, or busy with a large group) while the entries
	// came would otherwise wait again (in herd bench --scenario large, a
	// member that had claimed twice its share on a partial view handed it
	// back 3 s later than it could have).
	present := 0
	for _, s := range snap.Sessions {
		if !m.sessions[s.ID] {
			m.joinedAt = m.rep.sessionNews()
		} else {
			present++
		}
	}
	if present < len(m.sessions) && m.endedAt.IsZero() {
		m.endedAt = time.Now()
	}
	clear(m.sessions)
	for _, s := range snap.Sessions {
		m.sessions[s.ID] = true
	}
	// The log has answered since the last read (fresh): it showed the
	// sessions opened during the read, or waited for them as long as the
	// read took (see feedLoop's firstWait).
	if wait := time.Until(m.joinedAt.Add(m.cfg.JoinSettle)); wait > 0 {
		// A member just joined: others may be joining with it. Wait for
		// the membership to settle so the fleet moves once.
		pl.next = wait
		return pl, false, nil
	}
	if !m.endedAt.IsZero() {
		if wait := m.expirySettle(time.Now()); wait > 0 {
			pl.next = wait
			return pl, false, nil
		}
		m.endedAt = time.Time{}
	}
	return pl, true, nil
}

// expirySettle is how long plan waits, after sessions ended (first seen at
// m.endedAt), for the next session to expire, so that members that crashed
// together are planned for at once; 0: not at all. It waits when the store
// said the next session expires (m.expireDue) within a fortieth of
// SessionTTL, and when that is past but this member's own call to expire
// it is still to come (its answer says when the next is due: another
// member's call, or the log, may have brought the news first). The wait
// ends when the next expiry's entry comes (the feed wakes the loop), or
// just after the loop asked the store to expire it, and all such waits
// together last at most a tenth of SessionTTL from the first session ended.
//
// Members that crashed together expire at about the same time, not at
// once: their last renewals differ by a few ms to seconds. In ten traced
// runs of herd bench --scenario large without this wait, the 10 crashed
// sessions of 110 expired in one batch in five (194-200 plans in the
// phase, half of them the aims of the join before ending; the last
// partitions running again 0.88-1.34 s after the expiry, once 2.31 s) and
// in two to four batches in five: each batch made the 100 others plan
// anew (O(P) each), and again on seeing the claims of those that had
// planned after another batch: 443-551 plans, 1.75-2.23 s. A fleet of
// separate processes needs it as much: every member process plans once
// per batch of expiries it sees, and each plan's claims and releases wake
// every other member, whatever process it runs in.
func (m *Member) expirySettle(now time.Time) time.Duration {
	due, ttl := m.expireDue, m.cfg.SessionTTL
	if due.IsZero() {
		return 0
	}
	settle := expireDelay(ttl) + max(m.cfg.JoinSettle, 10*time.Millisecond)
	var wait time.Duration
	switch {
	case due.After(now) && due.Sub(now) <= ttl/40:
		wait = due.Sub(now) + settle
	case !due.After(now) && now.Before(due.Add(settle)):
		// Due, and this member's call to expire it about to be made.
		wait = due.Add(settle).Sub(now)
	default:
		return 0
	}
	if now.Add(wait).Sub(m.endedAt) > ttl/10 {
		return 0
	}
	return wait
}

// expireDelay is how long after a session is due to expire the reconcile
// loop asks the store to expire it: just after, never spinning. The due
// time is already late by the renewal's reply (KeepAlive says when on the
// store's clock, as a duration counted by the member from the reply), so
// the delay only absorbs timer slack: a thousandth of the TTL, 10 ms by
// default. It was a hundredth, which a crash's takeover waited for in
// full (herd bench --scenario large: the crashed sessions' partitions ran
// again 0.65-0.8 s after they were due, 0.1 s of it this delay).
func expireDelay(ttl time.Duration) time.Duration {
	return max(ttl/1000, 5*time.Millisecond)
}

// planGap is the least time between two plans of a group of p records, the
// last plan having taken took. A plan costs O(p) CPU time, and during a
// rebalance every batch of the log wakes the member: plans are spaced by
// the larger of 1 µs per record and 4 times the last plan's time, so that
// planning takes at most about a fifth of a core whatever the rate of
// changes, and never by more than limit (SessionTTL/40, 250 ms by
// default), so a burst delays a member's reaction by at most that. A lone
// change, after a quiet period, is planned at once.
func planGap(p int, took, limit time.Duration) time.Duration {
	return min(max(time.Duration(p)*time.Microsecond, 4*took), limit)
}

// partIndex returns the index of partition p in parts (sorted by ID) and
// whether it is there, trying *at first (where it was found last time; the
// set seldom changes) and storing the answer there: a member runs a
// thousand partitions or more, and searching each in 100,000 twice per plan
// cost more than the rest of the loop over them.
func partIndex(parts []store.Partition, p string, at *int32) (int, bool) {
	if i := int(*at); i < len(parts) && parts[i].ID == p {
		return i, true
	}
	i, ok := slices.BinarySearchFunc(parts, p, func(x store.Partition, id string) int { return strings.Compare(x.ID, id) })
	if ok {
		*at = int32(i)
	}
	return i, ok
}
