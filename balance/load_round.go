package balance

import (
	"cmp"
	"math"
	"slices"
	"sort"
)

// roundMove is one move of the round: partition i to member to. group is
// the number of moves, this one first, that are made together or not at
// all (an exchange), else 1.
type roundMove struct{ i, to, group int32 }

// aim is the distance from the mean, as a fraction of the trigger
// distance, that a round brings the members within.
const aim = 0.4

// round is step 4 of AssignLoad: it plans the whole round on a copy of the
// members' loads, checks its gain, and makes its first moves within the
// budget.
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
	aside := make([]bool, len(lp.members)) // set aside: nothing narrows their gap
	dist := func(l []float64) float64 {
		d := 0.0
		for _, m := range act {
			if !aside[m] {
				d = max(d, abs(l[m]/lp.c[m]-mu))
			}
		}
		return d
	}
	if dist(lp.l) <= t {
		return // trigger: in the band
	}
	// Each member's partitions of load > 0, by load then index.
	lists := make([][]int32, len(lp.members))
	for i, m := range lp.target {
		if m >= 0 && lp.ded[m] < 0 && lp.e[i] > 0 {
			lists[m] = append(lists[m], int32(i))
		}
	}
	for _, s := range lists {
		slices.SortFunc(s, lp.byLoad)
	}
	l := slices.Clone(lp.l)
	aimHi, aimLo := mu+float64(t*aim), mu-float64(t*aim)
	var moves []roundMove
	for steps := 0; steps <= len(lp.e); steps++ {
		a, b := -1, -1 // the most and the least loaded not set aside
		for _, m := range act {
			if aside[m] {
				continue
			}
			r := l[m] / lp.c[m]
			if a < 0 || r > l[a]/lp.c[a] {
				a = m
			}
			if b < 0 || r < l[b]/lp.c[b] || r == l[b]/lp.c[b] && lp.c[m] > lp.c[b] {
				b = m
			}
		}
		if a == b || l[a]/lp.c[a] <= aimHi && l[b]/lp.c[b] >= aimLo {
			break // the aim is reached
		}
		give, to := lp.step(lists, l, act, aside, a, mu, aimHi, aimLo)
		if give == nil {
			// Nothing narrows the gap of the member out of the aim (a,
			// else b) with any other: set it aside.
			if l[a]/lp.c[a] > aimHi {
				aside[a] = true
			} else {
				aside[b] = true
			}
			continue
		}
		for j, i := range give {
			from, dst := a, to
			if j > 0 {
				from, dst = to, a
			}
			k, _ := slices.BinarySearchFunc(lists[from], i, lp.byLoad)
			lists[from] = slices.Delete(lists[from], k, k+1)
			k, _ = slices.BinarySearchFunc(lists[dst], i, lp.byLoad)
			lists[dst] = slices.Insert(lists[dst], k, i)
			l[from] -= lp.e[i]
			l[dst] += lp.e[i]
			g := int32(0)
			if j == 0 {
				g = int32(len(give))
			}
			moves = append(moves, roundMove{i: i, to: int32(dst), group: g})
		}
	}
	if dist(lp.l)-dist(l) <= t/2 {
		return // minimum gain, on the members not set aside
	}
	for _, mv := range moves {
		if mv.group > 0 && lp.budget >= 0 && lp.budget < int(mv.group) {
			return // the budget is spent
		}
		lp.move(mv.i, mv.to)
	}
}

// byLoad orders partitions by load, then index.
func (lp *loadPlan) byLoad(a, b int32) int {
	if c := cmp.Compare(lp.e[a], lp.e[b]); c != 0 {
		return c
	}
	return cmp.Compare(a, b)
}

// step chooses the next move of the round from member a, the most loaded:
// a partition for another member (pick), else an exchange with it, trying
// the members by decreasing room, mu x capacity - load (then index): the
// one that can take the most load first, whatever its capacity. It
// returns the partitions (a's, then those given back) and the member a
// exchanges with, or nil.
func (lp *loadPlan) step(lists [][]int32, l []float64, act []int, aside []bool, a int, mu, aimHi, aimLo float64) ([]int32, int) {
	try := func(b int) []int32 {
		ra, rb := l[a]/lp.c[a], l[b]/lp.c[b]
		if k := lp.pick(lists[a], ra, rb, lp.c[a], lp.c[b], mu, aimHi, aimLo); k >= 0 {
			return []int32{lists[a][k]}
		}
		return lp.exchange(lists[a], lists[b], ra, rb, lp.c[a], lp.c[b])
	}
	others := make([]int, 0, len(act))
	for _, m := range act {
		if m != a && !aside[m] {
			others = append(others, m)
		}
	}
	room := func(m int) float64 { return float64(mu*lp.c[m]) - l[m] }
	slices.SortFunc(others, func(x, y int) int {
		if c := cmp.Compare(room(y), room(x)); c != 0 {
			return c
		}
		return cmp.Compare(x, y)
	})
	for _, m := range others {
		if give := try(m); give != nil {
			return give, m
		}
	}
	return nil, -1
}

// pick chooses the partition of s (one member's partitions of load > 0, by
// load) that the member a of relative load ra and capacity ca gives to the
// member b of relative load rb and capacity cb; it returns its index in s,
// or -1 if none lowers the sum of capacity x (r - mu)^2. See AssignLoad.
func (lp *loadPlan) pick(s []int32, ra, rb, ca, cb, mu, aimHi, aimLo float64) int {
	if len(s) == 0 || !(ra > rb) {
		return -1
	}
	x := (ra - rb) / (1/ca + 1/cb) // the transfer that equalises a and b
	need := max(float64((ra-aimHi)*ca), float64((aimLo-rb)*cb), 0)
	limit := min(float64((aimHi-rb)*cb), float64((ra-aimLo)*ca))
	e := lp.e
	ok := func(v float64) bool { return v > 0 && v < 2*x }
	closest := func(want, lo, hi float64) int {
		k := sort.Search(len(s), func(j int) bool { return e[s[j]] >= want })
		best := -1
		for _, j := range []int{k - 1, k} {
			if j < 0 || j >= len(s) || !ok(e[s[j]]) || e[s[j]] < lo || e[s[j]] > hi {
				continue
			}
			if best < 0 || abs(e[s[j]]-want) < abs(e[s[best]]-want) {
				best = j
			}
		}
		return best
	}
	if limit > 0 {
		// Within the aim for both, the load that brings the one further
		// from mu closest to it; else, between members of equal capacity,
		// the largest that keeps b within it. Between members of unequal
		// capacity that fallback gives b one small partition per move
		// while a holds partitions too large for b's room (dozens of moves
		// where one near the equalising transfer, and b's own round after
		// it, do).
		want := max(need, min(float64((ra-mu)*ca), float64((mu-rb)*cb), limit))
		if k := closest(want, need, limit); k >= 0 {
			return k
		}
		j := sort.Search(len(s), func(j int) bool { return e[s[j]] > limit }) - 1
		if ca == cb && (j < 0 || e[s[j]] < need/4) {
			// The largest within the aim would leave a more than four
			// moves from it (a partition a little above b's room, and
			// dozens of small ones): the one closest to want that keeps
			// b within the band, if it is larger (b, now above the aim,
			// gives later, in fewer moves).
			t := (aimHi - mu) / aim
			band := min(float64((mu+t-rb)*cb), float64((ra-mu+t)*ca))
			if k := closest(want, limit, band); k >= 0 && (j < 0 || e[s[k]] > e[s[j]]) {
				return k
			}
		}
		if j >= 0 && ok(e[s[j]]) && ca == cb {
			return j
		}
	}
	return closest(x, 0, math.Inf(1))
}

// exchange is the move of the round when no single partition of a can go
// to b (each of a's is at least twice the equalising transfer x): a gives
// b a partition p, and b gives a back, largest first, partitions that fit
// in e_p - x until less than x/2 of it is left, at most eight: the net
// transfer is in [x, 3x/2), so the sum of capacity x (r - mu)^2 falls. p
// is the smallest of a's partitions of load >= 2x, among the first four,
// for which b has such partitions. It returns p and b's partitions, or
// nil.
func (lp *loadPlan) exchange(sa, sb []int32, ra, rb, ca, cb float64) []int32 {
	if !(ra > rb) || len(sb) == 0 {
		return nil
	}
	x := (ra - rb) / (1/ca + 1/cb)
	e := lp.e
	first := sort.Search(len(sa), func(j int) bool { return e[sa[j]] >= 2*x })
	for _, p := range sa[first:min(first+4, len(sa))] {
		rem := e[p] - x
		back := []int32{p}
		for j := sort.Search(len(sb), func(j int) bool { return e[sb[j]] > rem }) - 1; j >= 0 && len(back) <= 8; j-- {
			if q := sb[j]; e[q] <= rem {
				back = append(back, q)
				rem -= e[q]
				if rem < x/2 {
					return back
				}
			}
		}
	}
	return nil
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
