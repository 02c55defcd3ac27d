package balance

import (
	"cmp"
	"math"
	"slices"
)

// dedicate is step 2: hot partitions alone on a member.
func (lp *loadPlan) dedicate() {
	n := len(lp.members)
	var R, C float64
	for _, x := range lp.e {
		R += x
	}
	for _, c := range lp.c {
		C += c
	}
	order := make([]int32, len(lp.e))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int {
		if c := cmp.Compare(lp.e[b], lp.e[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	free := n
	for _, i := range order {
		if free <= 1 || lp.e[i] <= 0 {
			break
		}
		mu := R / C
		cmin, cmax := math.Inf(1), 0.0
		for m := range n {
			if lp.ded[m] < 0 {
				cmin, cmax = min(cmin, lp.c[m]), max(cmax, lp.c[m])
			}
		}
		if lp.e[i] <= float64(float64(mu*cmin)*(1-lp.band)) {
			break // no later partition is hot either
		}
		o := lp.target[i]
		m := int32(-1)
		switch {
		case o >= 0 && lp.ded[o] < 0 && lp.alone(i, o) && lp.e[i] > float64(float64(mu*lp.c[o])*(1-lp.band)) &&
			(lp.c[o] == cmax || lp.e[i] <= float64(float64(mu*lp.c[o])*(1+lp.band))):
			m = o // alone on its owner, hot for it, and as well there as anywhere
		case lp.e[i] > float64(float64(mu*cmax)*(1+lp.band)):
			m = o
			if m < 0 || lp.ded[m] >= 0 || lp.c[m] != cmax {
				m = lp.widest()
			}
		default:
			continue
		}
		if !lp.move(i, m) {
			continue // no budget to move it: it stays as it is
		}
		lp.ded[m] = i
		free--
		R -= lp.e[i]
		C -= lp.c[m]
	}
}

// slack is the load, as a fraction of a hot partition's, that its member
// may hold besides it: Band/2 (the 5 % of the lower bound, by default).
func (lp *loadPlan) slack() float64 { return lp.band / 2 }

// alone reports whether partition i is alone on member o: its only
// partition of load > 0, or with others of total load within the slack.
func (lp *loadPlan) alone(i, o int32) bool {
	return lp.pos[o] == 1 || lp.l[o]-lp.e[i] <= float64(lp.slack()*lp.e[i])
}

// widest is the non-dedicated member of largest capacity, then least
// relative load, then smallest index.
func (lp *loadPlan) widest() int32 {
	best := int32(-1)
	for m := range lp.members {
		if lp.ded[m] >= 0 {
			continue
		}
		if best < 0 || lp.c[m] > lp.c[best] || lp.c[m] == lp.c[best] && lp.rel(m) < lp.rel(int(best)) {
			best = int32(m)
		}
	}
	return best
}

// place is step 3: unowned partitions, those of load > 0 on a dedicated
// member other than its own, and those too big for their member are placed
// on the non-dedicated members.
func (lp *loadPlan) place() {
	var pool []int32
	others := make([][]int32, len(lp.members)) // of dedicated members
	// A partition too big for its member: above capacity x (mu + t), with
	// mu the load of the partitions not put alone over the capacity of the
	// members not dedicated, and t the round's trigger distance.
	var R, C float64
	for i, m := range lp.target {
		if m < 0 || lp.ded[m] != int32(i) {
			R += lp.e[i]
		}
	}
	for m := range lp.members {
		if lp.ded[m] < 0 {
			C += lp.c[m]
		}
	}
	mu := R / C
	top := mu + max(float64(lp.band*mu), lp.floor)
	for i, m := range lp.target {
		switch {
		case m < 0:
			pool = append(pool, int32(i))
		case lp.ded[m] < 0 && lp.e[i] > float64(top*lp.c[m]):
			pool = append(pool, int32(i))
		case lp.ded[m] >= 0 && lp.ded[m] != int32(i) && lp.e[i] > 0:
			others[m] = append(others[m], int32(i))
		}
	}
	for m, s := range others {
		if len(s) == 0 {
			continue
		}
		// It keeps them if their load is within the slack, else its
		// smallest ones within half of it.
		sum := 0.0
		for _, i := range s {
			sum += lp.e[i]
		}
		h := lp.e[lp.ded[m]]
		if sum <= float64(lp.slack()*h) {
			continue
		}
		slices.SortFunc(s, func(a, b int32) int {
			if c := cmp.Compare(lp.e[a], lp.e[b]); c != 0 {
				return c
			}
			return cmp.Compare(a, b)
		})
		room, k := float64(lp.slack()*h)/2, 0
		for ; k < len(s) && lp.e[s[k]] <= room; k++ {
			room -= lp.e[s[k]]
		}
		pool = append(pool, s[k:]...)
	}
	slices.SortFunc(pool, func(a, b int32) int {
		if c := cmp.Compare(lp.e[b], lp.e[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	for _, i := range pool {
		best := -1
		for m := range lp.members {
			if lp.ded[m] >= 0 || best >= 0 && !lp.better(i, m, best) {
				continue
			}
			best = m
		}
		if best >= 0 {
			lp.move(i, int32(best))
		}
	}
}

// better reports whether member m is a better place than member b for
// partition i (step 3).
func (lp *loadPlan) better(i int32, m, b int) bool {
	if lp.e[i] > 0 {
		// A partition placed from a member not dedicated is still on its
		// account.
		after := func(m int) float64 {
			if lp.target[i] == int32(m) {
				return lp.l[m] / lp.c[m]
			}
			return (lp.l[m] + lp.e[i]) / lp.c[m]
		}
		return after(m) < after(b)
	}
	// Fewest partitions per capacity: cnt[m]/c[m] < cnt[b]/c[b].
	return float64(float64(lp.cnt[m])*lp.c[b]) < float64(float64(lp.cnt[b])*lp.c[m])
}
