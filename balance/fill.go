package balance

import "slices"

// The second stage of placing the pool: the partitions whose ideal member
// has no room left go, one after another in ring order, to the first member
// with room clockwise from their ring position, on a ring of fixed points
// (vnodesPerMember per member, placed by the member's hash alone).
//
// A partition's order of preference among the members is thus fixed (the
// ring does not depend on owners, quotas or room), and the partitions choose
// one after another in a fixed order. That makes the result keep its
// answer while it is carried out: a partition that moves to its target
// leaves the pool and takes one unit of that member's room, and each other
// partition finds the same members with room at its turn as before (a
// member that a partition chose had room at that partition's turn either
// way, and one it passed over is passed over again), so it chooses the same
// member. Members that read the group at different moments of a rebalance
// (some of the moves done, others not) compute the same target. The
// consistent hashing on slots numbered from a member's kept count up, used
// before, gave other members the rest of the pool as soon as one claim had
// landed (balance's TestHandoffKeepsTarget), and members on 100,000
// partitions planned in full several times per rebalance for it.

// vnodesPerMember is how many points each member has on the fill ring.
const vnodesPerMember = 16

// vnode is one point of a member on the fill ring.
type vnode struct {
	pos uint64
	m   int32
}

// fillRing returns the fill ring of p's members, sorted by position (then
// member index), and for each member the indices of its points in it; both
// are cached while the members stay the same.
func (w *work) fillRing(p *problem) ([]vnode, []int32) {
	if len(w.ringFor) > 0 && slices.Equal(w.ringFor, p.members) {
		return w.vring, w.vindex
	}
	n := len(p.members)
	ring := resize(w.vring, n*vnodesPerMember)[:0]
	for m := range p.members {
		for k := range vnodesPerMember {
			ring = append(ring, vnode{pos: slotPos(p.members[m].h, k), m: int32(m)})
		}
	}
	slices.SortFunc(ring, func(a, b vnode) int {
		switch {
		case a.pos < b.pos:
			return -1
		case a.pos > b.pos:
			return 1
		}
		return int(a.m) - int(b.m)
	})
	index := resize(w.vindex, n*vnodesPerMember)
	seen := resize(w.vseen, n)
	clear(seen)
	for i, v := range ring {
		index[int(v.m)*vnodesPerMember+int(seen[v.m])] = int32(i)
		seen[v.m]++
	}
	w.vring, w.vindex, w.vseen = ring, index, seen
	w.ringFor = append(w.ringFor[:0], p.members...)
	return ring, index
}

// fill places the partitions of pool (indices into p.parts, in ring
// order) on the members' room, quota[m] - kept[m]: each takes the first
// member with room clockwise from its position on the fill ring. The pool
// must not be larger than the room. It sets target[pi] for every pi in pool.
func (w *work) fill(p *problem, pool []int32, quota, kept []int, target []int32) {
	ring, index := w.fillRing(p)
	room := resize(w.room, len(p.members))
	for m := range room {
		room[m] = quota[m] - kept[m]
	}
	w.room = room
	// free: the points of members with room.
	S := len(ring)
	free := w.nextFree(S)
	full := func(m int) {
		for _, i := range index[m*vnodesPerMember : (m+1)*vnodesPerMember] {
			free.take(i)
		}
	}
	for m, r := range room {
		if r <= 0 {
			full(m)
		}
	}
	j := 0
	for _, pi := range pool {
		h := p.parts[pi].h
		for j < S && ring[j].pos < h {
			j++
		}
		s := free.clockwise(j)
		if int(s) == S {
			// Unreachable: the pool is no larger than the room. Kept so
			// odd input can never cause a panic.
			target[pi] = -1
			continue
		}
		m := ring[s].m
		target[pi] = m
		if room[m]--; room[m] == 0 {
			full(int(m))
		}
	}
}
