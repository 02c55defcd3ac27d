package balance

// The pool's first stage: each partition to its ideal member while that
// member has room.

// placeOnIdeal gives each partition of pool (indices into p.parts, each
// once, in any order) its ideal member, in ring order while that member has
// room (kept[m] < quota[m], kept counting each one placed), and returns the
// others in ring order: the rest for fill. It reuses pool's memory.
//
// Ring order decides only between the partitions of a member with less
// room than partitions whose ideal it is (and the order of the rest, all
// of such members): the partitions of every other member all fit, in any
// order. So only the first are put in ring order. In a first placement
// under way (every pool partition's ideal member has room for all of
// them) none are, and putting the pool in ring order was a fifth of
// the plan (BenchmarkFullPlan/placing).
func (w *work) placeOnIdeal(p *problem, pool, ideal []int32, quota, kept []int, target []int32) []int32 {
	// short[m]: m has less room than pool partitions whose ideal it is.
	want := resize(w.room, len(p.members)) // scratch: fill is not running
	clear(want)
	for _, pi := range pool {
		if m := ideal[pi]; m >= 0 {
			want[m]++
		}
	}
	w.room = want
	short := resize(w.short, len(p.members))
	for m := range short {
		short[m] = want[m] > quota[m]-kept[m]
	}
	w.short = short
	ordered := pool[:0]
	for _, pi := range pool {
		if m := ideal[pi]; m >= 0 && !short[m] {
			target[pi] = m
			kept[m]++
			continue
		}
		ordered = append(ordered, pi)
	}
	w.poolOrder(p, ordered) // which partitions get a member's room must not depend on input order
	rest := ordered[:0]
	for _, pi := range ordered {
		if m := ideal[pi]; m >= 0 && kept[m] < quota[m] {
			target[pi] = m
			kept[m]++
			continue
		}
		rest = append(rest, pi)
	}
	return rest
}

// poolOrder puts pool (indices into p.parts, each once) in ring order, as
// ringOrder does: a large pool (a first placement's: every partition not
// yet claimed) is picked out of the ring order of every partition, which
// idealOf left in w.ringAll, in O(P) instead of sorted again, with a bitmap
// of the pool's partitions (12.5 KB for 100,000, where an array of int32
// was 400 KB read at random).
func (w *work) poolOrder(p *problem, pool []int32) {
	if len(pool) < len(p.parts)/8 || len(w.ringAll) != len(p.parts) {
		w.ringOrder(p, pool)
		return
	}
	in := resize(w.taken, (len(p.parts)+63)/64) // scratch: match is not running
	w.taken = in
	clear(in)
	for _, pi := range pool {
		in[pi>>6] |= 1 << (pi & 63)
	}
	pool = pool[:0]
	for _, pi := range w.ringAll {
		if in[pi>>6]&(1<<(pi&63)) != 0 {
			pool = append(pool, pi)
		}
	}
}
