package balance

// The slots of an ideal, sorted by ring position: made from the last
// ideal's when that had members in common with this one.

import "cmp"

// slotRing is the ring of slots of the last ideal: every unit k below
// quota[m] of each member m, sorted by position, member index, unit
// (compareSlot). A new membership changes few slots (10 members joining
// 100 on 100,000 partitions: 9,090 new slots, 9,100 gone, 90,900 kept), and
// a slot's position depends on its member's id and unit alone: the ring of
// the next ideal is this one with the gone slots left out, the members
// renumbered (in the same order: members are sorted by id) and the new
// slots, sorted on their own, merged in. That is the same order as sorting
// every slot again (TestSlotRingMatchesSort), in one pass: the sort of
// every slot was a fifth of a plan on a new membership of 100 members on
// 100,000 partitions (BenchmarkFullPlan/first, in a CPU profile).
type slotRing struct {
	slots []slot   // sorted (compareSlot); for members and quota if len(members) > 0
	spare []slot   // the next ring's memory (a merge in place cost 6% more: BenchmarkFullPlan/first)
	fresh []slot   // the new slots
	oldOf []int32  // per member: its index in members, or -1
	remap []int32  // per index in members: the member's new index, or -1
	kmix  []uint64 // kmix[k]: mix64(k + slotSalt), for slotPos
	// members and quota: those of slots.
	members []member
	quota   []int
}

// ringFor returns the slots of members' units below quota, sorted by
// position, then member index, then unit; buf is sortSlots' scratch. The
// slice is valid until the next call.
func (r *slotRing) ringFor(members []member, quota []int, buf *[]slot) []slot {
	r.mixUpTo(quota)
	common := r.renumber(members)
	// fresh and the merged ring sized at once (counted first): grown by
	// appends from empty, they were copied log2(n) times on a member's
	// first plans (1 s of 33 s of CPU of 100 member processes on 100,000
	// partitions, in a CPU profile).
	nFresh, nAll := 0, 0
	for m := range members {
		nFresh += max(quota[m]-r.from(m), 0)
		nAll += quota[m]
	}
	fresh := resize(r.fresh, nFresh)[:0]
	for m := range members {
		for k := r.from(m); k < quota[m]; k++ {
			fresh = append(fresh, slot{pos: r.slotPos(members[m].h, k), m: int32(m), k: int32(k)})
		}
	}
	*buf = sortSlots(fresh, *buf, compareUnits)
	if common {
		r.slots, r.spare, r.fresh = r.mergeKept(resize(r.spare, nAll)[:0], fresh, quota), r.slots, fresh
	} else { // every slot is new
		r.slots, r.fresh = fresh, r.slots
	}
	r.members = append(r.members[:0], members...)
	r.quota = append(r.quota[:0], quota...)
	return r.slots
}

// from returns the first unit of members[m] that r.slots lacks: the
// quota it had there, if it was a member (renumber has set oldOf).
func (r *slotRing) from(m int) int {
	if o := r.oldOf[m]; o >= 0 {
		return r.quota[o]
	}
	return 0
}

// renumber sets oldOf and remap between r.members and members (both sorted
// by id) and reports whether they have a member in common.
func (r *slotRing) renumber(members []member) bool {
	r.oldOf = resize(r.oldOf, len(members))
	r.remap = resize(r.remap, len(r.members))
	for i := range r.oldOf {
		r.oldOf[i] = -1
	}
	for i := range r.remap {
		r.remap[i] = -1
	}
	common := false
	for i, j := 0, 0; i < len(r.members) && j < len(members); {
		switch c := cmp.Compare(r.members[i].id, members[j].id); {
		case c < 0:
			i++
		case c > 0:
			j++
		default:
			r.remap[i], r.oldOf[j] = int32(j), int32(i)
			common = true
			i++
			j++
		}
	}
	return common
}

// mergeKept appends to out the slots of r.slots that quota keeps
// (renumbered) merged with fresh (sorted), in order.
func (r *slotRing) mergeKept(out, fresh []slot, quota []int) []slot {
	// next: the position of fresh[f]; past the last, the largest one,
	// which the full comparison sorts right.
	f, next := 0, ^uint64(0)
	if len(fresh) > 0 {
		next = fresh[0].pos
	}
	for _, s := range r.slots {
		m := r.remap[s.m]
		if m < 0 || int(s.k) >= quota[m] {
			continue
		}
		s.m = m
		for next <= s.pos && f < len(fresh) && compareSlot(fresh[f], s) < 0 {
			out = append(out, fresh[f])
			if f++; f < len(fresh) {
				next = fresh[f].pos
			} else {
				next = ^uint64(0)
			}
		}
		out = append(out, s)
	}
	return append(out, fresh[f:]...)
}

// mixUpTo makes r.kmix cover every unit below the largest quota.
func (r *slotRing) mixUpTo(quota []int) {
	most := 0
	for _, q := range quota {
		most = max(most, q)
	}
	for k := len(r.kmix); k < most; k++ {
		r.kmix = append(r.kmix, mix64(uint64(k)+slotSalt))
	}
}

// slotPos is the package's slotPos, with the unit's mix from the table.
func (r *slotRing) slotPos(mh uint64, k int) uint64 { return mix64(mh ^ r.kmix[k]) }

// compareSlot orders slots by position, then member index, then unit.
func compareSlot(a, b slot) int {
	if a.pos != b.pos {
		return cmp.Compare(a.pos, b.pos)
	}
	return compareUnits(a, b)
}

// compareUnits orders slots by member index, then unit.
func compareUnits(a, b slot) int {
	if c := cmp.Compare(a.m, b.m); c != 0 {
		return c
	}
	return cmp.Compare(a.k, b.k)
}
