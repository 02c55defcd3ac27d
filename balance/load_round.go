package balance

import (
	"cmp"
	"slices"
	"sort"
)

// roundMove is one move of the round: partition i from member from to to.
type roundMove struct{ i, from, to int32 }

// round is step 4 of AssignLoad: it plans the whole round on copies of the
// members' loads and lists, checks its gain, and makes its first moves
// within the budget.
func (lp *loadPlan) round() {
	var act []int // the non-dedicated members
	var L, C float64
	for m := range lp.members {
		if lp.ded[m] < 0 {
			act = append(act, m)
			L += lp.l[m]
			C += lp.c[m]
		}
	}
	if len(act) < 2 || !(L > 0) {
		return
	}
	mu := L / C
	t := max(float64(lp.band*mu), lp.floor)
	l := slices.Clone(lp.l)
	dist := func() float64 {
		lo, hi := l[act[0]]/lp.c[act[0]], l[act[0]]/lp.c[act[0]]
		for _, m := range act[1:] {
			r := l[m] / lp.c[m]
			lo, hi = min(lo, r), max(hi, r)
		}
		return max(hi-mu, mu-lo)
	}
	d0 := dist()
	if d0 <= t {
		return // trigger: in the band
	}
	// Each member's partitions of load > 0, by load then index.
	lists := make([][]int32, len(lp.members))
	for i, m := range lp.target {
		if m >= 0 && lp.ded[m] < 0 && lp.e[i] > 0 {
			lists[m] = append(lists[m], int32(i))
		}
	}
	byLoad := func(a, b int32) int {
		if c := cmp.Compare(lp.e[a], lp.e[b]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	}
	for _, s := range lists {
		slices.SortFunc(s, byLoad)
	}
	aimHi, aimLo := mu+t/4, mu-t/4
	var moves []roundMove
	for steps := 0; steps <= len(lp.e); steps++ {
		a, b := act[0], act[0]
		for _, m := range act[1:] {
			r := l[m] / lp.c[m]
			if r > l[a]/lp.c[a] {
				a = m
			}
			rb := l[b] / lp.c[b]
			if r < rb || r == rb && lp.c[m] > lp.c[b] {
				b = m
			}
		}
		ra, rb := l[a]/lp.c[a], l[b]/lp.c[b]
		if a == b || ra <= aimHi && rb >= aimLo {
			break // the aim is reached
		}
		k := lp.pick(lists[a], ra, rb, lp.c[a], lp.c[b], aimHi, aimLo)
		if k < 0 {
			break // no move narrows the gap of a and b
		}
		i := lists[a][k]
		lists[a] = slices.Delete(lists[a], k, k+1)
		at, _ := slices.BinarySearchFunc(lists[b], i, byLoad)
		lists[b] = slices.Insert(lists[b], at, i)
		l[a] -= lp.e[i]
		l[b] += lp.e[i]
		moves = append(moves, roundMove{i: i, from: int32(a), to: int32(b)})
	}
	if d0-dist() <= t/2 {
		return // minimum gain
	}
	for _, mv := range moves {
		if !lp.move(mv.i, mv.to) {
			return // the budget is spent
		}
	}
}

// pick chooses the partition of s (one member's partitions of load > 0, by
// load) that the member a of relative load ra and capacity ca gives to the
// member b of relative load rb and capacity cb; it returns its index in s,
// or -1 if none lowers the sum of capacity x (r - mu)^2. See AssignLoad.
func (lp *loadPlan) pick(s []int32, ra, rb, ca, cb, aimHi, aimLo float64) int {
	if len(s) == 0 || !(ra > rb) {
		return -1
	}
	x := (ra - rb) / (1/ca + 1/cb) // the transfer that equalises a and b
	need := max(float64((ra-aimHi)*ca), float64((aimLo-rb)*cb), 0)
	limit := min(float64((aimHi-rb)*cb), float64((ra-aimLo)*ca))
	e := lp.e
	ok := func(v float64) bool { return v > 0 && v < 2*x }
	if limit > 0 {
		// The smallest load >= need that fits, else the largest that fits.
		k := sort.Search(len(s), func(j int) bool { return e[s[j]] >= need })
		if k < len(s) && e[s[k]] <= limit && ok(e[s[k]]) {
			return k
		}
		j := sort.Search(len(s), func(j int) bool { return e[s[j]] > limit }) - 1
		if j >= 0 && ok(e[s[j]]) {
			return j
		}
	}
	// The load closest to x.
	k := sort.Search(len(s), func(j int) bool { return e[s[j]] >= x })
	best := -1
	for _, j := range []int{k - 1, k} {
		if j < 0 || j >= len(s) || !ok(e[s[j]]) {
			continue
		}
		if best < 0 || abs(e[s[j]]-x) < abs(e[s[best]]-x) {
			best = j
		}
	}
	return best
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
