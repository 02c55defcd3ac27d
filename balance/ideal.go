package balance

// Each member's ideal partitions (by rendezvous hashing on a ring of slots), and the matching of the pool to the members' quotas.

import (
	"cmp"
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
// partition, O(P log P)). The caller must not change it.
func (w *work) idealOf(p *problem, quota []int) []int32 {
	if !w.idealOK {
		w.ideals = w.ideals[:0]
		w.ringAll = nil
		w.fpOK = false
		w.idealOK = true
	}
	for i, c := range w.ideals {
		if slices.Equal(c.members, p.members) && slices.Equal(c.quota, quota) {
			copy(w.ideals[1:i+1], w.ideals[:i]) // most recent first
			w.ideals[0] = c
			return c.target
		}
	}
	if !w.fpOK {
		w.fp, w.fpOK = fingerprint(p.parts), true
	}
	target, ring, set := sharedIdeal(p, w.fp, quota)
	if ring != nil && w.ringAll == nil {
		w.ringAll = ring
	}
	c := ideal{members: slices.Clone(p.members), quota: slices.Clone(quota), target: target}
	if target == nil {
		if len(w.ringAll) != len(p.parts) {
			all := make([]int32, len(p.parts))
			for pi := range all {
				all[pi] = int32(pi)
			}
			w.ringOrder(p, all)
			w.ringAll = all
		}
		// New memory: the shared ideal, and w.ringAll, are read-only.
		pool := append(resize(w.all, len(p.parts))[:0], w.ringAll...)
		w.all = pool
		c.target = make([]int32, len(p.parts))
		w.match(p, pool, quota, c.target)
		publishIdeal(set, c, w.ringAll)
	}
	if len(w.ideals) == maxIdeals {
		w.ideals = w.ideals[:maxIdeals-1]
	}
	w.ideals = slices.Insert(w.ideals, 0, c)
	return c.target
}

// match places the partitions of pool (indices into p.parts) on the
// members' quota units: one slot per unit k below quota[m] of each member
// m, on a hash ring, and each pool partition, in ring order, takes the
// first free slot clockwise from its position (consistent hashing with
// bounded loads). The pool must be in ring order (ringOrder) and have as
// many partitions as there are units. It sets target[pi] for every pi in
// pool.
func (w *work) match(p *problem, pool []int32, quota []int, target []int32) {
	slots := resize(w.slots, len(pool))[:0]
	for m := range p.members {
		for k := 0; k < quota[m]; k++ {
			slots = append(slots, slot{pos: slotPos(p.members[m].h, k), m: int32(m), k: int32(k)})
		}
	}
	w.slots = slots
	w.buf = sortSlots(slots, w.buf, func(a, b slot) int {
		if c := cmp.Compare(a.m, b.m); c != 0 {
			return c
		}
		return cmp.Compare(a.k, b.k)
	})

	// Walk the pool in ring order; each partition takes the first free slot
	// at or after its ring position, wrapping around.
	S := len(slots)
	free := w.nextFree(S)
	j := 0
	for _, pi := range pool {
		pt := &p.parts[pi]
		for j < S && slots[j].pos < pt.h {
			j++
		}
		s := free.clockwise(j)
		if int(s) == S {
			// Unreachable: there are exactly as many slots as pool
			// partitions. Kept so odd input can never cause a panic.
			target[pi] = -1
			continue
		}
		target[pi] = slots[s].m
		free.take(s)
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

// poolOrder puts pool (indices into p.parts, each once) in ring order, as
// ringOrder does: a large pool (a first placement's: every partition not
// yet claimed) is picked out of the ring order of every partition, which
// idealOf left in w.ringAll, in O(P) instead of sorted again.
func (w *work) poolOrder(p *problem, pool []int32) {
	if len(pool) < len(p.parts)/8 || len(w.ringAll) != len(p.parts) {
		w.ringOrder(p, pool)
		return
	}
	in := resize(w.next, len(p.parts)) // scratch: nextFree is not in use
	w.next = in
	clear(in)
	for _, pi := range pool {
		in[pi] = 1
	}
	pool = pool[:0]
	for _, pi := range w.ringAll {
		if in[pi] != 0 {
			pool = append(pool, pi)
		}
	}
}

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
