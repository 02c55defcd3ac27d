package herd

// The plan's target: what the last full plan decided, so that the entries
// that only carry it out cost no plan.
//
// A full plan costs O(P), and during a rebalance nearly every entry is a
// claim by the partition's target owner or a release by an owner handing it
// on, after which balance finds the same target (TestPartialFillKeepsTarget,
// TestHandoffKeepsTarget). So the feed checks each entry as it arrives
// (O(log P) at most), plan runs in full only on one that is not such
// progress, and a release toward this member is claimed without one.
//
// The target is dropped whenever something else may call for action (a
// read of the group, a plan left something to look at later, a session
// lost, a contested claim unexplained). It expires RenewInterval after the
// first entry it let pass (up to maxTargetLife), and a third of that (or
// twice the time its plan and claims took: stretchQuiet) after the last
// once the log is quiet, so what the check cannot see is acted on
// within that bound; one the copy shows met, or no entry reached, lasts on,
// and one by count whose part for this member is met lasts on with twice
// the life, up to maxTargetLife (onTargetRunning).

import (
	"slices"
	"time"

	"github.com/herdhq/herd/store"
)

// planTarget is the target of the last full plan.
type planTarget struct {
	sess    string            // this member's session
	parts   []store.Partition // the partition set planned (sorted; read-only)
	members []string          // live session ids, by index
	target  []int32           // per partition of parts: index in members (-1: none)
	due     time.Time         // when to plan in full again anyway (zero: see life)
	life    time.Duration     // how long after the first entry it let pass the target lasts
	byCount bool              // the plan found the published loads all equal (see replica.progress)
	quiet   time.Duration     // how long after the last entry it let pass the target lasts (life/3, or stretchQuiet's)
	layout  uint64            // the read of the group the copy plan used descends from (replica.layout before current)
	// recPart: per record of the copy plan used (placeholders included),
	// the index in parts of its partition (-1: outside the set; nil: search
	// parts), saving the feed a search per entry (a third of a µs on 100,000).
	recPart []int32
}

// newPlanTarget records the target of a full plan (sessions and parts
// sorted by id; target and recPart copied), reusing the lists of prev
// (nil: none), the member's previous target, which must be nobody else's.
func newPlanTarget(prev *planTarget, sess string, sessions []store.SessionInfo, parts []store.Partition, target, recPart []int32, life time.Duration) *planTarget {
	a := prev
	if a == nil {
		a = &planTarget{}
	}
	*a = planTarget{sess: sess, parts: parts, life: life, quiet: life / 3,
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

// maxTargetLife bounds a target's life, in RenewIntervals: a full plan
// that finds the same target (a long placement under way) doubles it, as
// a full plan of 100,000 partitions costs every member 20 to 25 ms of CPU.
const maxTargetLife = 4

// same reports whether a (nil: none) is the target sess found for these
// sessions and partitions (both sorted by id).
func (a *planTarget) same(sess string, sessions []store.SessionInfo, parts []store.Partition, target []int32) bool {
	if a == nil || a.sess != sess || !slices.Equal(a.target, target) {
		return false
	}
	return slices.EqualFunc(a.members, sessions, func(id string, s store.SessionInfo) bool { return id == s.ID }) &&
		(sameSlice(a.parts, parts) || slices.EqualFunc(a.parts, parts, func(x, y store.Partition) bool { return x.ID == y.ID }))
}

// noteUnchecked keeps batches applied while no target was set, for
// setTarget: up to changesPerRead entries, beyond which the next target is
// off. r.mu is held.
func (r *replica) noteUnchecked(cs []store.Change) {
	if r.nunchecked > changesPerRead {
		return
	}
	if r.nunchecked += len(cs); r.nunchecked > changesPerRead {
		clear(r.unchecked)
		r.unchecked = r.unchecked[:0]
		return
	}
	r.unchecked = append(r.unchecked, cs)
}

// forgetUnchecked empties what noteUnchecked kept. r.mu is held.
func (r *replica) forgetUnchecked() {
	clear(r.unchecked)
	r.unchecked, r.nunchecked = r.unchecked[:0], 0
}

// setTarget makes a the target, for a full plan of the copy at version v,
// and checks the entries after v against it: those applied meanwhile
// (noteUnchecked; all must have been kept), then those queued.
func (r *replica) setTarget(a *planTarget, v store.Version) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.target, r.offTarget, r.targetFirst, r.toClaim = a, false, time.Time{}, nil
	defer r.forgetUnchecked()
	if r.work == nil {
		r.offTarget = true
		return
	}
	r.loads.of(r.work.Loads) // the reports applied since the plan's copy included
	next := v.Seq + 1        // the next entry to check
	if r.work.Version != v {
		for _, cs := range r.unchecked {
			for _, c := range cs {
				if c.Version.Seq < next {
					continue // in the plan's copy
				}
				if ok, claim := r.progress(a, c, -1, false); c.Version.Seq != next || !r.noteProgress(c.Partition, ok, claim) {
					r.offTarget = true
					return
				}
				next++
			}
		}
		if r.nunchecked > changesPerRead || next != r.work.Version.Seq+1 {
			r.offTarget = true
			return
		}
	}
	r.reachedTarget(int(next - v.Seq - 1))
	for _, cs := range r.pending {
		r.checkTarget(cs)
	}
}

// stretchQuiet makes a's quiet time (if still the target) at least twice
// round, the time its full plan and the claims it made took, within its
// life: the other members plan and claim on the same host and store about
// as slowly, so a log quiet for less is the fleet still at work, not a
// stall (TestSlowRoundKeepsTheTarget: a pause of 1.5 s in the others'
// claims after a round of 1 s cost a full plan, none with this).
func (r *replica) stretchQuiet(a *planTarget, round time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.target == a && a != nil {
		a.quiet = min(a.life, max(a.quiet, 2*round))
	}
}

// dropTarget makes the next plan a full one.
func (r *replica) dropTarget() {
	r.mu.Lock()
	r.target, r.toClaim = nil, nil
	r.forgetUnchecked()
	r.mu.Unlock()
}

// onTargetRunning reports whether every entry since the last full plan was
// progress toward its target, and if so the partitions released toward
// this member since (each returned once) and how long until the target
// expires. A target whose life ends lasts on (until the next entry) if the
// copy shows it met by a member whose slots run for sess; slots nil: it ends.
// One by count whose life is short of maxLife lasts on with twice the life
// if the copy shows this member's part met: a full plan would find it again
// (the fill keeps its answer while the others carry it out: balance's
// TestPartialFillKeepsTarget), and do nothing (TestOwnPartKeepsTheTarget:
// 3 full plans while the others place over 18 s, 1 with this).
func (r *replica) onTargetRunning(sess *session, slots map[string]*slot, now time.Time, maxLife time.Duration) (next time.Duration, claims []string, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a := r.target
	if !r.targetValid(sess.id, now) {
		return 0, nil, false
	}
	claims, r.toClaim = r.toClaim, nil
	next = a.life // nothing to do: look again then (this is cheap)
	if !r.targetFirst.IsZero() {
		end := r.targetEnd()
		if !now.Before(end) {
			if slots == nil || len(claims) > 0 || !r.applyPending(false) {
				r.toClaim = claims
				return 0, nil, false
			}
			switch {
			case r.met(a, sess, slots, false):
			case a.byCount && a.life < maxLife && r.met(a, sess, slots, true):
				a.life = min(2*a.life, maxLife)
			default:
				r.toClaim = claims
				return 0, nil, false
			}
			r.targetFirst = time.Time{}
		} else {
			next = end.Sub(now)
		}
	}
	if !a.due.IsZero() {
		next = min(next, a.due.Sub(now))
	}
	return next, claims, true
}

// targetValid reports whether the target is session sess's, every entry
// since was progress toward it, and it is not due at now. r.mu is held.
func (r *replica) targetValid(sess string, now time.Time) bool {
	a := r.target
	if a == nil || r.offTarget || a.sess != sess || r.work == nil || r.readAsked || r.distrusted {
		return false
	}
	return a.due.IsZero() || now.Before(a.due)
}

// onTargetNow reports whether onTargetRunning would answer ok at now
// without looking at the copy, taking nothing.
func (r *replica) onTargetNow(sess string, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.targetValid(sess, now) && (r.targetFirst.IsZero() || now.Before(r.targetEnd()))
}

// targetEnd is when the target's life (from targetFirst, not zero) or its
// quiet time ends. r.mu is held.
func (r *replica) targetEnd() time.Time {
	a := r.target
	end := r.targetFirst.Add(a.life)
	if q := r.targetLast.Add(a.quiet); a.quiet > 0 && q.Before(end) {
		end = q
	}
	return end
}

// checkTarget checks entries not applied yet against the target (the
// records stay where they are). r.mu is held.
func (r *replica) checkTarget(cs []store.Change) {
	if r.target == nil || r.offTarget {
		return
	}
	exact := r.hintExact(r.target)
	for _, c := range cs {
		if ok, claim := r.progressIn(r.target, c, exact); !r.noteProgress(c.Partition, ok, claim) {
			return
		}
	}
	r.reachedTarget(len(cs))
}

// reachedTarget notes that n entries were progress toward the target (if
// still on): its life starts with the first, its quiet time with the
// last. r.mu is held.
func (r *replica) reachedTarget(n int) {
	if r.target != nil && !r.offTarget && n > 0 {
		r.targetLast = time.Now()
		if r.targetFirst.IsZero() {
			r.targetFirst = r.targetLast
		}
	}
}

// met reports whether the copy shows a carried out, so a full plan would
// do nothing: every partition held by its target owner without a
// give-back mark, none of this member's records outside the set, and this
// member's slots running for sess exactly those it holds. With own, only
// this member's part: the partitions the target gives it, and its records.
// r.mu is held, the pending entries applied.
func (r *replica) met(a *planTarget, sess *session, slots map[string]*slot, own bool) bool {
	w := r.work
	if a.recPart == nil || w == nil || !sameSlice(w.Partitions, a.parts) || len(w.Owners) != len(a.recPart) || len(w.Sessions) != len(a.members) {
		return false
	}
	mine := 0
	for j := range w.Owners {
		o := &w.Owners[j]
		k := a.recPart[j]
		if k < 0 {
			if o.Session == a.sess {
				return false
			}
			continue
		}
		t := a.target[k]
		if own && o.Session != a.sess && (t < 0 || a.members[t] != a.sess) {
			continue // another's part
		}
		if t < 0 || o.Epoch == 0 || o.GivenBack != "" || o.Session != a.members[t] || o.Partition != a.parts[k].ID {
			return false
		}
		if o.Session == a.sess {
			if sl := slots[o.Partition]; sl == nil || !sl.runsFor(sess) {
				return false
			}
			mine++
		}
	}
	for _, sl := range slots {
		if sl.runsFor(sess) {
			mine--
		}
	}
	return mine == 0
}
