package herd

// Whether an entry of the log is progress toward the target of the last
// full plan (target.go): a claim by its target owner, a release toward
// it, a load report that leaves a count balance as it is.

import "github.com/herdhq/herd/store"

// progressHint reports whether entry c only carries out the target (a
// claim by the target owner, or a plain release by another owner), and
// claim, whether it is a release toward this member. rec, if >= 0, is the
// index of the record in the copy: a hint, checked against the id unless
// exact (replica.hintExact; the check is most of an entry's cost).
func (a *planTarget) progressHint(c store.Change, rec int, exact bool) (ok, claim bool) {
	return a.progressOf(&c, rec, exact)
}

// progressOf is progressHint of the entry *c. The feed checks each entry
// through a pointer: a Change is 192 bytes, and the copies of each entry
// passed by value (to progress, then here) were a quarter of the check's
// samples in CPU profiles of 100 member processes placing 100,000
// partitions on Redis (BenchmarkFollowPlacementRedis follows the same
// placement in one process).
func (a *planTarget) progressOf(c *store.Change, rec int, exact bool) (ok, claim bool) {
	if c.Kind != store.Claimed && c.Kind != store.Released {
		return false, false
	}
	i, found := -1, false
	if rec >= 0 && rec < len(a.recPart) {
		k := int(a.recPart[rec])
		switch {
		case exact && k < 0:
			return false, false // a record outside the set planned
		case k >= 0 && k < len(a.parts) && (exact || a.parts[k].ID == c.Partition):
			i, found = k, true
		}
	}
	if !found {
		i, found = searchPartition(a.parts, c.Partition)
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

// progress is a.progressHint, and for a load report, whether the loads
// stay all equal (equalLoads), so a target by count stands: members that
// moved partitions all report at once, and at 100 members on 100,000
// partitions each report cost every member a full plan. r.mu is held.
func (r *replica) progress(a *planTarget, c store.Change, rec int, exact bool) (ok, claim bool) {
	return r.progressOf(a, &c, rec, exact)
}

// progressOf is progress of the entry *c (see planTarget.progressOf).
func (r *replica) progressOf(a *planTarget, c *store.Change, rec int, exact bool) (ok, claim bool) {
	if c.Kind == store.LoadsReported {
		return a.byCount && r.loads.after(c.Loads), false
	}
	return a.progressOf(c, rec, exact)
}

// progressIn is progress with the record's index found in the copy, which
// plan may be reading meanwhile. r.mu is held.
func (r *replica) progressIn(a *planTarget, c store.Change, exact bool) (ok, claim bool) {
	rec := -1
	if a.recPart != nil && r.work != nil && c.Partition != "" {
		if j, ok := r.work.RecordIndex(c.Partition); ok {
			rec = j
		}
	}
	return r.progressOf(a, &c, rec, exact)
}

// equalLoads tells whether the loads of a copy and of the reports checked
// after it are all equal (none: equal), so plan balances by count
// (loadmeter.Align). A load replacing another is taken as unequal.
type equalLoads struct {
	equal, known bool
	value        float64
}

// of starts from the loads of a copy.
func (e *equalLoads) of(loads []store.Load) {
	*e = equalLoads{equal: true}
	e.after(loads)
}

// after adds the loads of a report, and reports whether all are still equal.
func (e *equalLoads) after(loads []store.Load) bool {
	for _, l := range loads {
		switch {
		case !e.known:
			e.known, e.value = true, l.Load
		case l.Load != e.value:
			e.equal = false
		}
	}
	return e.equal
}

// hintExact reports whether the copy's records are where they were in the
// copy a's plan used, so a.recPart needs no check: the same read, as many
// records (Apply only inserts). r.mu is held.
func (r *replica) hintExact(a *planTarget) bool {
	return a.recPart != nil && r.work != nil && a.layout == r.layout && len(r.work.Owners) == len(a.recPart)
}

// noteProgress notes what an entry about p (progress ok, a release toward
// this member claim) calls for: nothing, a claim (toClaim), or a full plan
// (offTarget; false). r.mu is held.
func (r *replica) noteProgress(p string, ok, claim bool) bool {
	switch {
	case !ok:
		r.offTarget = true
	case claim:
		r.toClaim = append(r.toClaim, p)
	}
	return ok
}
