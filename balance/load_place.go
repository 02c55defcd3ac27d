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
	ceil := 0.0 // the largest relative load of a dedicated member
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
		top := max(ceil, lp.e[i]/cmax) // no member can be below e/cmax with it
		hi := mu + float64(aim*max(float64(lp.band*mu), lp.floor))
		o := lp.target[i]
		m := int32(-1)
		switch {
		case o >= 0 && lp.ded[o] < 0 && lp.alone(i, o) && lp.e[i] > float64(float64(mu*lp.c[o])*(1-lp.band)) &&
			(lp.e[i]/lp.c[o] <= top || lp.e[i] <= float64(float64(mu*lp.c[o])*(1+lp.band))):
			m = o // alone on its owner, hot for it, and not above the top
		case lp.e[i] > float64(hi*cmax):
			m = o // hot: it stays on its member if it is not above the top there
			if m < 0 || lp.ded[m] >= 0 || lp.e[i]/lp.c[m] > top {
				m = lp.host(i, top, float64(float64(mu*cmin)*(1-lp.band)))
			}
			if m < 0 {
				continue
			}
		default:
			continue
		}
		if !lp.move(i, m) {
			continue // no budget to move it: it stays as it is
		}
		lp.ded[m] = i
		ceil = max(ceil, lp.e[i]/lp.c[m])
		free--
		R -= lp.e[i]
		C -= lp.c[m]
	}
}

// host is the member a hot partition i is put alone on: among the
// members not dedicated on which its relative load is at most top, and
// that hold no other partition above warm (one that may be hot itself),
// the one that takes the fewest moves (its current member, else one move
// for i, plus the partitions the member gives up, as place does), then
// the largest, then the least relative load, then the smallest index.
// If every such member holds a partition above warm, the same among all.
func (lp *loadPlan) host(i int32, top, warm float64) int32 {
	on := make([][]float64, len(lp.members)) // loads of each candidate's other partitions
	busy := make([]bool, len(lp.members))    // it holds another partition above warm
	for j, m := range lp.target {
		if m >= 0 && int32(j) != i && lp.ded[m] < 0 && lp.e[i]/lp.c[m] <= top && lp.e[j] > 0 {
			on[m] = append(on[m], lp.e[j])
			busy[m] = busy[m] || lp.e[j] > warm
		}
	}
	for _, any := range []bool{false, true} {
		best, bestCost := int32(-1), 0
		for m := range lp.members {
			if lp.ded[m] >= 0 || lp.e[i]/lp.c[m] > top || busy[m] && !any {
				continue
			}
			cost := lp.gives(on[m], lp.e[i])
			if lp.target[i] != int32(m) {
				cost++
			}
			if best < 0 || cost < bestCost || cost == bestCost && (lp.c[m] > lp.c[best] ||
				lp.c[m] == lp.c[best] && lp.rel(m) < lp.rel(int(best))) {
				best, bestCost = int32(m), cost
			}
		}
		if best >= 0 {
			return best
		}
	}
	return -1
}

// gives is the number of partitions, of loads s, that a member dedicated
// to a partition of load h gives up in place: none if they are within the
// slack, else all but the smallest within keep x the slack. It sorts s.
func (lp *loadPlan) gives(s []float64, h float64) int {
	sum := 0.0
	for _, x := range s {
		sum += x
	}
	if sum <= float64(lp.slack()*h) {
		return 0
	}
	slices.Sort(s)
	room, k := float64(float64(lp.slack()*h)*keep), 0
	for ; k < len(s) && s[k] <= room; k++ {
		room -= s[k]
	}
	return len(s) - k
}

// slack is the load, as a fraction of a hot partition's, that its member
// may hold besides it: Band/2 (the 5 % of the lower bound, by default).
func (lp *loadPlan) slack() float64 { return lp.band / 2 }

// keep is the part of the slack that a dedicated member giving up
// partitions keeps: 0.8, so that loads each published within 10 % of
// their value (a member publishes only changes beyond that) never put the
// kept partitions above the slack ((1-0.1)/(1+0.1) > 0.8).
const keep = 0.8

// alone reports whether partition i is alone on member o: its only
// partition of load > 0, or with others of total load within the slack.
func (lp *loadPlan) alone(i, o int32) bool {
	return lp.pos[o] == 1 || lp.l[o]-lp.e[i] <= float64(lp.slack()*lp.e[i])
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
		// smallest ones within keep x the slack.
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
		room, k := float64(float64(lp.slack()*h)*keep), 0
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
