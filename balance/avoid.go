package balance

import "math/bits"

// Avoid moves partitions off the members they must not be placed on (a
// member that gave a partition back because it kept failing there). It is
// a deterministic step after [Assigner.AssignSorted], on the same input:
// members and partitions sorted by ID, owner[i] the index in members of
// partitions[i]'s current owner or -1, and target the assignment
// AssignSorted returned, which Avoid changes in place. avoid[i] is the index
// in members of the member partitions[i] must not be placed on, or -1 (any
// value outside members is read as -1). avoid may be nil: nothing to avoid.
// It returns how many partitions it moved.
//
// With fewer than two members nothing moves: a partition runs on the
// member that gave it back rather than nowhere. Otherwise each partition i
// whose target is avoid[i] goes, in partition order, to
//
//  1. its current owner, if it has one and it is not the member to avoid:
//     the partition stays where it runs, so the plan does not move it away
//     and back; else
//  2. the least loaded other member: fewest target partitions per unit of
//     weight (counting the partitions Avoid has moved so far), ties broken
//     by the rendezvous score of the partition for the member (the score
//     balancing ranks by), then by member ID.
//
// The result depends on the input alone, as Assign's does, so every member
// computes it alike. It does not flap: once a moved partition runs on its
// new owner, rule 1 keeps it there. That owner may then hold one partition
// over its quota and the avoided member one under; balancing may move
// another partition from the one to the other (never the avoided one), and
// that ripple ends in a fixed point: in TestAvoidSettles' 3,000 random
// fleets, within two steps when every planned move is made at once, and
// within 20 when moves are made a random part at a time (the test logs
// both). At the fixed
// point the members hold, in total, no more partitions over their quotas
// than there are partitions to avoid. When the mark is lifted (avoid[i]
// back to -1), balancing treats the partition like any other.
//
// Cost: O(N + P) to count the loads, and O(N) per partition moved.
func Avoid(members []Member, partitions []Partition, owner, avoid, target []int32) int {
	n := int32(len(members))
	if n < 2 || len(avoid) == 0 {
		return 0
	}
	P := min(len(partitions), len(avoid), len(target), len(owner))
	var load, keys []uint64 // per member: target partitions, rendezvous key; built on the first rule-2 move
	moved := 0
	for i := range P {
		a := avoid[i]
		if a < 0 || a >= n || target[i] != a {
			continue
		}
		if o := owner[i]; o >= 0 && o < n && o != a {
			if load != nil {
				load[a]--
				load[o]++
			}
			target[i] = o
			moved++
			continue
		}
		if load == nil {
			load, keys = make([]uint64, n), make([]uint64, n)
			for _, t := range target {
				if t >= 0 && t < n {
					load[t]++
				}
			}
			for m, mb := range members {
				keys[m] = newMember(mb).key
			}
		}
		ph := hashString(partitions[i].ID)
		best := int32(-1)
		var bestScore uint64
		for m := range n {
			if m == a {
				continue
			}
			s := score(ph, keys[m])
			if best >= 0 {
				// Members come in ID order: on equal load and score the
				// first (smaller ID) stays.
				c := compareLoad(load[m], weightOf(members[m]), load[best], weightOf(members[best]))
				if c > 0 || c == 0 && s <= bestScore {
					continue
				}
			}
			best, bestScore = m, s
		}
		load[a]--
		load[best]++
		target[i] = best
		moved++
	}
	return moved
}

// weightOf is a member's weight as balancing counts it (<= 0 is 1).
func weightOf(m Member) uint64 {
	if m.Weight <= 0 {
		return 1
	}
	return uint64(m.Weight)
}

// compareLoad compares the loads l1/w1 and l2/w2 exactly (-1, 0, +1), by
// 128-bit cross products.
func compareLoad(l1, w1, l2, w2 uint64) int {
	ah, al := bits.Mul64(l1, w2)
	bh, bl := bits.Mul64(l2, w1)
	switch {
	case ah < bh || ah == bh && al < bl:
		return -1
	case ah > bh || ah == bh && al > bl:
		return 1
	}
	return 0
}
