package balance

// The ideal and the assignment as they were first computed (every slot
// sorted anew, a union-find walk, the whole pool sorted), kept as the
// reference the faster ones must equal bit for bit.

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

// refAssign is the assignment of p as first computed, with refIdeal: the
// sticky pass, over-quota members' partitions ranked by a full sort, the
// whole pool put in ring order by a sort and given to ideal members while
// they have room, the rest to fill (unchanged since).
func refAssign(p *problem) []int32 {
	quota := computeQuotas(p.members, p.held, len(p.parts))
	target := make([]int32, len(p.parts))
	kept := make([]int, len(p.members))
	over := make([][]int32, len(p.members))
	var pool []int32
	for pi, o := range p.owner {
		target[pi] = -1
		switch {
		case o < 0:
			pool = append(pool, int32(pi))
		case p.held[o] <= quota[o]:
			target[pi] = o
			kept[o]++
		default:
			over[o] = append(over[o], int32(pi))
		}
	}
	for o, list := range over {
		if len(list) == 0 {
			continue
		}
		key := p.members[o].key
		slices.SortFunc(list, func(a, b int32) int {
			if c := cmp.Compare(^score(p.parts[a].h, key), ^score(p.parts[b].h, key)); c != 0 {
				return c
			}
			return strings.Compare(p.parts[a].id, p.parts[b].id)
		})
		q := min(quota[o], len(list))
		for _, pi := range list[:q] {
			target[pi] = int32(o)
		}
		kept[o] = q
		pool = append(pool, list[q:]...)
	}
	if len(pool) == 0 {
		return target
	}
	ideal := refIdeal(p, quota)
	if len(pool) == len(p.parts) {
		return ideal
	}
	slices.SortFunc(pool, func(a, b int32) int {
		if c := cmp.Compare(p.parts[a].h, p.parts[b].h); c != 0 {
			return c
		}
		return strings.Compare(p.parts[a].id, p.parts[b].id)
	})
	var rest []int32
	for _, pi := range pool {
		if m := ideal[pi]; m >= 0 && kept[m] < quota[m] {
			target[pi] = m
			kept[m]++
			continue
		}
		rest = append(rest, pi)
	}
	if len(rest) > 0 {
		var w work
		w.fill(p, rest, quota, kept, target)
	}
	return target
}
