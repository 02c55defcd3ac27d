package herd

// The aim: what the last full plan decided, so that the entries that only
// carry it out cost no plan.
//
// A full plan costs O(P) for P partitions: applying the log's entries to
// the replica, joining the records with the partition set, computing the
// target. During a rebalance nearly every entry is progress toward the
// target every member computed: a claim of a partition by its target owner,
// or the release of a partition by an owner that hands it to another.
// Such an entry changes nothing this member has to do, and the target
// computed after it is the same (balance keeps every partition's target
// while the moves to it are carried out, in any order: see balance's
// TestPartialFillKeepsTarget for a fill and TestHandoffKeepsTarget for a
// rebalance). So the feed checks each entry
// against the aim as it arrives (O(log P)), and plan runs in full only when
// an entry is not such progress: a session opened, closed or expired, a
// claim by another member than the target, a release of a partition whose
// target is this member (it is to claim it), a give-back, a restore, a new
// partition set. A 100,000-partition first placement then costs each
// member a few full plans instead of one per batch of entries.
//
// The aim is dropped, and the next plan is full, whenever something else
// may call for action: a read of the group, a plan that left something to
// look at later (a hold, JoinSettle), a session lost, the log read to its
// end with a contested claim still unexplained. A contested claim (one that
// failed although the copy showed the partition free) waits for the entry
// that explains it, which is not progress: the aim then lasts until the
// claim is due to be looked at again (see plan), not longer.
// It also expires RenewInterval after the first entry it let pass, so that
// a target that did change after all (an assumption the check cannot prove
// for every input) or a record of this member's that it does not run (a
// claim whose reply was lost) is acted on within that bound. It expires
// sooner, a third of that after the last entry it let pass, once the log
// has gone quiet: the rebalance is over, or stuck on a partition some
// member holds for a target that no longer holds, which only that
// member's full plan can see. Members that planned on different copies
// (one that saw 94 of 100 sessions in a first placement, and claimed 64
// partitions too many) can compute different targets for a partition:
// in herd bench --scenario large the one holding it kept it until its aim
// expired, twice, and the placement took 10.6 s instead of 4. That costs
// one full plan per member after a rebalance, none at rest. An aim no
// entry has reached does not expire: a plan of the same copy would find
// the same (a fleet at rest made every member plan in full every
// RenewInterval for nothing, and in the large bench those plans, which
// fell together, delayed the join that followed the placement).

import (
	"slices"
	"strings"
	"time"

	"github.com/herdhq/herd/store"
)

// aim is the target of the last full plan.
type aim struct {
	sess    string            // this member's session
	parts   []store.Partition // the partition set planned (sorted; read-only)
	members []string          // live session ids, by index
	target  []int32           // per partition of parts: index in members (-1: none)
	due     time.Time         // when to plan in full again anyway (zero: see life)
	life    time.Duration     // how long after the first entry it let pass the aim lasts
	quiet   time.Duration     // how long after the last entry it let pass the aim lasts (life/3)
	// recPart: per record of the copy plan used (by index in its Owners,
	// placeholders included), the index in parts of its partition (-1: a
	// record outside the set). The feed finds an entry's record in the
	// copy by its index (one map lookup) and its partition here, instead
	// of searching parts (a third of a microsecond per entry on 100,000
	// partitions, per member). nil: search.
	recPart []int32
}

// newAim records the target of a full plan: sessions and parts as plan saw
// them (sorted by id), target as balance computed it and recPart (nil: none)
// as join found it (both copied), and how long it lasts once an entry has
// reached it. The lists of prev (nil: none), the member's previous aim, are
// reused: prev must be nobody else's any more (the replica's aim was
// dropped). A new target and hint per plan were 800 KB on 100,000
// partitions, a twentieth of the CPU of 100 members placing them.
func newAim(prev *aim, sess string, sessions []store.SessionInfo, parts []store.Partition, target, recPart []int32, life time.Duration) *aim {
	a := prev
	if a == nil {
		a = &aim{}
	}
	*a = aim{sess: sess, parts: parts, life: life, quiet: life / 3,
		target: append(a.target[:0], target...), members: a.members[:0], recPart: a.recPart[:0]}
	for _, s := range sessions {
		a.members = append(a.members, s.ID)
	}
	if recPart == nil {
		a.recPart = nil
	} else {
		a.recPart = append(a.recPart, recPart...)
	}
	return a
}

// progress reports whether entry c only carries out the aim: a claim by
// the partition's target owner, or a plain release by an owner that is not
// its target owner; claim, whether it is such a release of a partition
// whose target owner is this member, which it is to claim.
func (a *aim) progress(c store.Change) (ok, claim bool) { return a.progressAt(c, -1) }

// progressAt is progress for an entry whose partition's record is at index
// rec of the copy's records, if rec >= 0: a hint, checked against the
// partition's id (the records may have moved since the plan).
func (a *aim) progressAt(c store.Change, rec int) (ok, claim bool) {
	if c.Kind != store.Claimed && c.Kind != store.Released {
		return false, false
	}
	i, found := -1, false
	if rec >= 0 && rec < len(a.recPart) {
		if k := int(a.recPart[rec]); k >= 0 && k < len(a.parts) && a.parts[k].ID == c.Partition {
			i, found = k, true
		}
	}
	if !found {
		i, found = slices.BinarySearchFunc(a.parts, c.Partition, func(p store.Partition, id string) int { return strings.Compare(p.ID, id) })
	}
	if !found || int(a.target[i]) < 0 || int(a.target[i]) >= len(a.members) {
		return false, false
	}
	t := a.members[a.target[i]]
	if c.Kind == store.Claimed {
		return c.Session == t, false
	}
	if c.GivenBack != "" || c.Session == t {
		return false, false
	}
	return true, t == a.sess
}

// progressIn is progressAt with the record's index found in the copy snap.
// Only reads snap: plan may be reading it at the same time.
func (a *aim) progressIn(c store.Change, snap *store.Snapshot) (ok, claim bool) {
	rec := -1
	if a.recPart != nil && snap != nil && c.Partition != "" {
		if j, ok := snap.RecordIndex(c.Partition); ok {
			rec = j
		}
	}
	return a.progressAt(c, rec)
}

// judge notes what an entry about partition p, found progress toward the
// aim (ok) and a release toward this member (claim) or not, calls for:
// nothing, a claim (p is queued in toClaim), or a full plan (offAim, and
// false). r.mu is held.
func (r *replica) judge(p string, ok, claim bool) bool {
	switch {
	case !ok:
		r.offAim = true
	case claim:
		r.toClaim = append(r.toClaim, p)
	}
	return ok
}

// noteUnchecked keeps batches applied to the copy while no aim was set (a
// plan under way, then its claims), for setAim to check: up to
// changesPerRead entries, beyond which the next aim is off. r.mu is held.
func (r *replica) noteUnchecked(cs []store.Change) {
	if r.uncheckedOver {
		return
	}
	if r.nunchecked += len(cs); r.nunchecked > changesPerRead {
		clear(r.unchecked)
		r.unchecked, r.uncheckedOver = r.unchecked[:0], true
		return
	}
	r.unchecked = append(r.unchecked, cs)
}

// forgetUnchecked empties what noteUnchecked kept. r.mu is held.
func (r *replica) forgetUnchecked() {
	clear(r.unchecked)
	r.unchecked, r.nunchecked, r.uncheckedOver = r.unchecked[:0], 0, false
}

// setAim makes a the aim, for a full plan of the copy at version v. The
// entries after v are checked against it: those the feed applied to the
// copy meanwhile (noteUnchecked), then those still queued. If the applied
// ones were not all kept, the aim is off.
func (r *replica) setAim(a *aim, v store.Version) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.aim, r.offAim, r.aimFirst, r.toClaim = a, false, time.Time{}, nil
	defer r.forgetUnchecked()
	if r.work == nil {
		r.offAim = true
		return
	}
	checked := 0
	if r.work.Version != v {
		next := v.Seq + 1 // the next entry to check
		for _, cs := range r.unchecked {
			for _, c := range cs {
				if c.Version.Seq < next {
					continue // in the plan's copy
				}
				if ok, claim := a.progress(c); c.Version.Seq != next || !r.judge(c.Partition, ok, claim) {
					r.offAim = true
					return
				}
				next++
				checked++
			}
		}
		if r.uncheckedOver || next != r.work.Version.Seq+1 {
			r.offAim = true
			return
		}
	}
	for _, cs := range r.pending {
		for _, c := range cs {
			if ok, claim := a.progressIn(c, r.work); !r.judge(c.Partition, ok, claim) {
				return
			}
			checked++
		}
	}
	if checked > 0 {
		r.aimFirst = time.Now()
		r.aimLast = r.aimFirst
	}
}

// dropAim makes the next plan a full one.
func (r *replica) dropAim() {
	r.mu.Lock()
	r.aim, r.toClaim = nil, nil
	r.forgetUnchecked()
	r.mu.Unlock()
}

// onAim reports whether every entry since the last full plan was progress
// toward its aim, so that plan has nothing to do but claim the partitions
// released toward this member since (claims, taken: each is returned
// once), and if so how long until the aim expires.
func (r *replica) onAim(sess string, now time.Time) (next time.Duration, claims []string, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a := r.aim
	if a == nil || r.offAim || a.sess != sess || r.work == nil || r.again || r.distrusted {
		return 0, nil, false
	}
	if !a.due.IsZero() && !now.Before(a.due) {
		return 0, nil, false
	}
	claims, r.toClaim = r.toClaim, nil
	next = a.life // nothing to do: look again then (onAim is cheap)
	if !r.aimFirst.IsZero() {
		end := r.aimFirst.Add(a.life)
		if q := r.aimLast.Add(a.quiet); a.quiet > 0 && q.Before(end) {
			end = q
		}
		if !now.Before(end) {
			return 0, nil, false
		}
		next = end.Sub(now)
	}
	if !a.due.IsZero() {
		next = min(next, a.due.Sub(now))
	}
	return next, claims, true
}

// checkAim checks entries that just arrived against the aim. r.mu is held.
func (r *replica) checkAim(cs []store.Change) {
	if r.aim == nil || r.offAim {
		return
	}
	for _, c := range cs {
		if ok, claim := r.aim.progressIn(c, r.work); !r.judge(c.Partition, ok, claim) {
			return
		}
	}
	r.reachedAim(cs)
}

// reachedAim notes that the entries cs, checked, were all progress toward
// the aim (if it is still on): the aim's life starts with the first, and
// its quiet time with the last.
// r.mu is held.
func (r *replica) reachedAim(cs []store.Change) {
	if r.aim != nil && !r.offAim && len(cs) > 0 {
		r.aimLast = time.Now()
		if r.aimFirst.IsZero() {
			r.aimFirst = r.aimLast
		}
	}
}
