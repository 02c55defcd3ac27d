package balance

// The ideal as it was first computed (every slot sorted anew, a union-find
// walk), kept as the reference the faster one must equal bit for bit.

import (
	"cmp"
	"slices"
	"strings"
)

// refIdeal returns the ideal of p's partitions for its members and quota:
// the partitions in ring order (by hash, then ID), each taking the first
// free slot at or after its position, wrapping around, on the ring of every
// quota unit's slot sorted by position, member, unit.
func refIdeal(p *problem, quota []int) []int32 {
	ring := make([]slot, len(p.parts))
	for pi := range p.parts {
		ring[pi] = slot{pos: p.parts[pi].h, m: int32(pi)}
	}
	slices.SortFunc(ring, func(a, b slot) int {
		if c := cmp.Compare(a.pos, b.pos); c != 0 {
			return c
		}
		return strings.Compare(p.parts[a.m].id, p.parts[b.m].id)
	})
	var slots []slot
	for m := range p.members {
		for k := 0; k < quota[m]; k++ {
			slots = append(slots, slot{pos: slotPos(p.members[m].h, k), m: int32(m), k: int32(k)})
		}
	}
	slices.SortFunc(slots, compareSlot)
	target := make([]int32, len(p.parts))
	refWalk(slots, ring, func(r slot) uint64 { return r.pos }, target)
	return target
}

// refWalk is the union-find walk of the reference: ring (partition index
// in m) in ring order, each taking the first free slot at or after pos(it),
// wrapping around; target[-] = -1 when no slot is free.
func refWalk(slots, ring []slot, pos func(slot) uint64, target []int32) {
	S := len(slots)
	next := make([]int32, S+1)
	for i := range next {
		next[i] = int32(i)
	}
	free := nextFree(next)
	j := 0
	for _, r := range ring {
		for j < S && slots[j].pos < pos(r) {
			j++
		}
		s := free.clockwise(j)
		if int(s) == S {
			target[r.m] = -1
			continue
		}
		target[r.m] = slots[s].m
		free.take(s)
	}
}
