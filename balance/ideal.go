package balance

// Each member's ideal partitions (by rendezvous hashing on a ring of slots), and the matching of the pool to the members' quotas.

import (
	"slices"
	"strings"
)

// ideal is the target of every partition without owners for members and
// quotas.
type ideal struct {
	members []member
	quota   []int
	target  []int32
}

// maxIdeals is how many ideals an Assigner keeps: a member that plans at
// different moments of a rebalance (again after a session expired, or
// while joiners arrive one by one) sees two or three memberships in turn,
// and computing an ideal was 7% of the CPU of 100 members on 100,000
// partitions (measured with the members in one process) when only the
// last was kept.
const maxIdeals = 4

// idealOf returns the ideal for p's members and quota: cached while the
// partitions stay the same, computed otherwise (a matching of every
// partition, O(P), once the ring order is known). The caller must not
// change it, nor keep it past the next call: the memory of the ideal the
// cache drops is the new one's (a new array was 400 KB of the 650 KB a
// plan on a new membership allocated: BenchmarkFullPlan/joined10, B/op).
func (w *work) idealOf(p *problem, quota []int) []int32 {
	if !w.idealOK {
		w.ideals = w.ideals[:0]
		w.ringAll, w.ringH = w.ringAll[:0], w.ringH[:0] // memory for the new set's
		w.idealOK = true
	}
	for i, c := range w.ideals {
		if slices.Equal(c.members, p.members) && slices.Equal(c.quota, quota) {
			copy(w.ideals[1:i+1], w.ideals[:i]) // most recent first
			w.ideals[0] = c
			return c.target
		}
	}
	if len(w.ringAll) != len(p.parts) {
		w.ringAll, w.ringH = w.ringOrderAll(p)
	}
	c := ideal{members: slices.Clone(p.members), quota: slices.Clone(quota)}
	if len(w.ideals) == maxIdeals { // the least recent one's memory is free again
		c.target = w.ideals[maxIdeals-1].target
		w.ideals = w.ideals[:maxIdeals-1]
	}
	c.target = resize(c.target, len(p.parts))
	w.match(w.slotRing.ringFor(p.members, quota, &w.buf), w.ringAll, w.ringH, c.target)
	w.ideals = slices.Insert(w.ideals, 0, c)
	return c.target
}

// ringOrderAll returns every partition of p in ring order, and their
// hashes in that order.
func (w *work) ringOrderAll(p *problem) ([]int32, []uint64) {
	all := resize(w.ringAll, len(p.parts))
	for pi := range all {
		all[pi] = int32(pi)
	}
	w.ringOrder(p, all)
	h := resize(w.ringH, len(all))
	for i, r := range w.ring { // ringOrder's, sorted: the hashes in order
		h[i] = r.pos
	}
	return all, h
}

// match places the partitions of ring (indices into target, in ring
// order, h their hashes) on slots, sorted by position then member then
// unit, one partition per slot: each partition, in ring order, takes the
// first free slot at or after its position, wrapping around (consistent
// hashing with bounded loads). It sets target[pi] to the slot's member for
// every pi in ring (-1 if no slot is free: never, as an ideal has as many
// slots as partitions).
//
// No search for a free slot is needed. Before the first partition wraps
// around, the slots taken at or after a partition's first candidate j are
// exactly [j, f), f one past the last slot taken: each earlier partition
// had a first candidate at or before j (ring order) and took the first
// free slot from there, so every slot between its candidate and the slot
// it took was taken. A partition thus takes max(j, f), or wraps around if
// that is past the end; then so do all after it (their candidates are at
// or after j, and [j, end) stays full), each taking the first free slot
// from the start, found by a cursor over a bitmap of the slots taken. The
// union-find search of a free slot it replaces was an eighth of a plan on
// a new membership of 100 members on 100,000 partitions
// (BenchmarkFullPlan/first, in a CPU profile); TestMatchMatchesReference
// compares the two.
func (w *work) match(slots []slot, ring []int32, h []uint64, target []int32) {
	S := len(slots)
	taken := resize(w.taken, (S+63)/64)
	clear(taken)
	w.taken = taken
	j, f, c := 0, 0, 0 // first candidate, frontier, wrap cursor
	for i, pi := range ring {
		for j < S && slots[j].pos < h[i] {
			j++
		}
		s := max(j, f)
		if s == S {
			for c < S && taken[c>>6]&(1<<(c&63)) != 0 {
				c++
			}
			if c == S {
				target[pi] = -1 // unreachable, see above
				continue
			}
			s = c
		} else {
			f = s + 1
		}
		taken[s>>6] |= 1 << (s & 63)
		target[pi] = slots[s].m
	}
}

// nextFree is a union-find "next free position" array over n positions and
// a sentinel n.
type nextFree []int32

// nextFree returns w's nextFree array over n positions, every one free.
func (w *work) nextFree(n int) nextFree {
	w.next = resize(w.next, n+1)
	for i := range w.next {
		w.next[i] = int32(i)
	}
	return nextFree(w.next)
}

// find returns the first free position at or after i (n if none).
func (f nextFree) find(i int32) int32 {
	for f[i] != i {
		f[i] = f[f[i]] // path halving
		i = f[i]
	}
	return i
}

// clockwise returns the first free position at or after i, wrapping around
// to 0 (n if none is free).
func (f nextFree) clockwise(i int) int32 {
	n := int32(len(f) - 1)
	s := f.find(int32(i))
	if s == n {
		s = f.find(0)
	}
	return s
}

// take marks position i used.
func (f nextFree) take(i int32) { f[i] = i + 1 }

// ringOrder sorts pool (indices into p.parts) in ring order: by hash, then
// ID, whatever the order of the input.
func (w *work) ringOrder(p *problem, pool []int32) {
	ring := resize(w.ring, len(pool))[:0]
	for _, pi := range pool {
		ring = append(ring, slot{pos: p.parts[pi].h, m: pi})
	}
	w.ring = ring
	w.buf = sortSlots(ring, w.buf, func(a, b slot) int {
		return strings.Compare(p.parts[a.m].id, p.parts[b.m].id)
	})
	for i := range ring {
		pool[i] = ring[i].m
	}
}
