package balance

import (
	"fmt"
	"math"
)

// defaultBand is LoadOptions.Band's default.
const defaultBand = 0.10

// LoadOptions are the hysteresis and the move budget of
// [Assigner.AssignLoad]. The zero value is ready to use: a band of 10 %, no
// floor, no move budget.
type LoadOptions struct {
	// Band is the relative part of the trigger band (default 0.10; values
	// <= 0 or not finite mean the default).
	Band float64
	// Floor is its absolute part, in load per unit of member capacity: no
	// member closer than Floor to the mean is out of the band, whatever its
	// relative distance (noise at low load moves nothing). <= 0: none.
	Floor float64
	// MaxMoves bounds the partitions with a live owner that one call moves
	// (placing an unowned partition is not a move). <= 0: no bound.
	MaxMoves int
}

// AssignLoad computes the target owner of every partition from the
// partitions' loads, moving at most o.MaxMoves partitions that have a live
// owner. members, partitions, owner and target are as for
// [Assigner.AssignSorted] (members and partitions sorted by ID without
// duplicates; owner[i] the index of partitions[i]'s current owner or -1);
// load[i] is the measured load of partitions[i] (nil: every load is 1). A
// member's Weight is its capacity. It fails on unsorted input, on slices of
// different lengths, and on a load slice of the wrong length.
//
// # Loads
//
// The load of partition i is Weight x load[i] (a Weight <= 0 counts as 1, a
// load that is not a finite number >= 0 counts as 0). A member's load is
// the sum of its partitions' loads, its relative load r that sum over its
// capacity.
//
// # Equal loads: the count balance
//
// When every partition has the same load (in particular with load nil and
// equal weights) the result is AssignSorted's, except that only the first
// MaxMoves of its moves, in partition order, are made; the others stay on
// their owner, and the next call, made on the fleet that carried them out,
// gives the rest of the same assignment. With no budget it is exactly
// AssignSorted's result, and so its moves are minimal ([MinMoves]).
//
// # Unequal loads
//
// The result is computed in four steps, each a function of the input alone
// (partitions in index order, ties broken by index, no map iteration).
// Float arithmetic is written so that no multiply-add can be fused, so
// every member computes the same bits on every platform.
//
//  1. Start from the live owners.
//  2. Hot partitions are put alone on a member. A partition is alone on a
//     member when the member's other partitions carry at most Band/2 of
//     its load. Let mu be the load of the partitions not yet put alone over
//     the capacity of the members not yet dedicated, t the round's trigger
//     distance for it (below), cmax the largest capacity of those
//     members, and top the largest relative load of a member dedicated so
//     far (or of the partition on a member of capacity cmax, if larger):
//     no assignment has its most loaded member below it. Partitions are
//     taken by decreasing load. One alone on its owner, with a load above
//     mu x (1-Band) x the owner's capacity, stays there if its relative
//     load there is at most top or the load is at most mu x (1+Band) x the
//     owner's capacity. Otherwise one with a load above (mu + 0.4t) x cmax
//     (too big for the round's aim on any member) is hot: it stays on its
//     owner if its relative load there is at most top, else goes to the
//     member where it is at most top that takes the fewest moves (itself,
//     and the partitions the member gives up in step 3), among those that
//     hold no other partition that may be hot, then of largest capacity,
//     least relative load, smallest index. Either way that member is
//     dedicated to it and mu is recomputed; at least one member is never
//     dedicated. (The two thresholds are the hysteresis of this step: a
//     partition near the fair share neither becomes hot nor stops being
//     hot on noise. A partition hotter than a small member's fair share
//     but below top on a middle one goes alone to the middle one: a large
//     member would give up more partitions for it.)
//  3. A dedicated member whose other partitions carry more than Band/2 of
//     its hot partition's load keeps the smallest of them within 0.8 x
//     Band/2 and gives up the rest (0.8: loads published within 10 % of
//     their value do not put the kept ones above Band/2). A partition on a non-dedicated member whose
//     load alone puts that member out of the band (above capacity x
//     (mu + t), mu as step 2 leaves it and t the round's trigger
//     distance, below) is too big for it. These, and the unowned
//     partitions, are placed by decreasing load, each on the
//     non-dedicated member whose relative load after taking it is least
//     (a partition of load 0: the member with the fewest partitions per
//     capacity), so a partition too big for a small member goes at once
//     to a large one.
//  4. A round balances the non-dedicated members, below.
//
// # Hysteresis of the round
//
// Among the non-dedicated members let mu be their total load over their
// total capacity, and t = max(Band*mu, Floor) the trigger distance. A
// member's distance is |r - mu|; the fleet's, d, is the largest. Then:
//
//   - trigger: nothing moves while d <= t (the fleet is in the band);
//   - aim: once triggered, partitions move, one at a time from the member
//     of highest relative load to that of lowest, until every member is
//     within 0.4t of mu. A member out of the aim that no move or exchange
//     (below) with any other member brings closer is set aside;
//   - minimum gain: the round is made only if it lowers d, over the
//     members not set aside, by more than t/2 (an absolute part Floor/2
//     and a relative part Band*mu/2). A round that reaches the aim from
//     outside the band lowers d by more than 0.6t, so reaching the band is
//     never refused as noise;
//   - floor: with Band*mu < Floor, t is Floor: members within Floor of the
//     mean never trigger, however small the mean.
//
// A fleet the round left within 0.4t of the mean moves again only when its
// loads drift by more than 0.6t of the mean (6 % with the defaults). A
// budget that cuts a round short may leave members anywhere within t, and
// the next call moves nothing until one leaves the band: a budget that
// does not cut rounds keeps the noise margin.
//
// Each move takes, from the member a of highest relative load, the
// partition that best brings the one of a and the receiver b further from
// mu towards it while both stay within the aim; else, if a and b have the
// same capacity, the largest that keeps b within it (unless it is below a
// quarter of what a must give to reach the aim: then the one closest to
// that which keeps b within the band, if larger; b gives later); else the
// one closest to the transfer that would equalise them. The receiver is the member
// with the most room (mu x capacity - load) for which there is such a
// partition or an exchange (below), so a large member that can take a
// large partition comes before a small one that can take only a small
// one. When every partition of a is at least
// twice that transfer, a gives b one partition and b gives a back up to
// eight smaller ones (an exchange). A move is made only if it lowers the
// sum over members of capacity x (r - mu)^2, so the round ends. The
// round's first moves within the budget left by steps 2 and 3 are the
// result (an exchange is made whole or not at all).
//
// Cost: O(P log P + N*(D + F) + M*(N log N + S)) for P partitions, N
// members, D dedicated members, F placed partitions, M moves of the round
// and S the largest number of partitions on one member.
func (a *Assigner) AssignLoad(members []Member, partitions []Partition, owner []int32, load []float64, o LoadOptions, target []int32) ([]int32, error) {
	if load != nil && len(load) != len(partitions) {
		return nil, fmt.Errorf("balance: %d loads for %d partitions", len(load), len(partitions))
	}
	e, equal := effectiveLoads(partitions, load)
	if equal || len(members) == 0 {
		target, err := a.AssignSorted(members, partitions, owner, target)
		if err != nil {
			return nil, err
		}
		limitMoves(owner, target, int32(len(members)), o.MaxMoves)
		return target, nil
	}
	// The same checks as AssignSorted's.
	if len(owner) != len(partitions) {
		return nil, fmt.Errorf("balance: %d owners for %d partitions", len(owner), len(partitions))
	}
	for i := 1; i < len(members); i++ {
		if members[i-1].ID >= members[i].ID {
			return nil, fmt.Errorf("balance: members not sorted by ID without duplicates at %q, %q", members[i-1].ID, members[i].ID)
		}
	}
	for i := 1; i < len(partitions); i++ {
		if partitions[i-1].ID >= partitions[i].ID {
			return nil, fmt.Errorf("balance: partitions not sorted by ID without duplicates at %q, %q", partitions[i-1].ID, partitions[i].ID)
		}
	}
	a.valid = false // the count balance's caches do not know this input
	lp := newLoadPlan(members, e, owner, o)
	lp.dedicate()
	lp.place()
	lp.round()
	target = resize(target, len(partitions))
	copy(target, lp.target)
	return target, nil
}

// effectiveLoads returns each partition's load, Weight x load (see
// AssignLoad), and whether they are all equal.
func effectiveLoads(partitions []Partition, load []float64) ([]float64, bool) {
	e := make([]float64, len(partitions))
	equal := true
	for i, p := range partitions {
		w := float64(max(p.Weight, 1))
		l := 1.0
		if load != nil {
			l = load[i]
			if math.IsNaN(l) || math.IsInf(l, 0) || l < 0 {
				l = 0
			}
		}
		e[i] = float64(w * l)
		if e[i] != e[0] {
			equal = false
		}
	}
	return e, equal
}

// limitMoves keeps the first max moves of target (partitions whose target
// differs from a live owner), in partition order, and puts the others back
// on their owner. max <= 0: no limit.
func limitMoves(owner, target []int32, n int32, max int) {
	if max <= 0 {
		return
	}
	moves := 0
	for i, t := range target {
		o := owner[i]
		if o < 0 || o >= n || t == o {
			continue
		}
		if moves == max {
			target[i] = o
			continue
		}
		moves++
	}
}

// loadPlan is the working state of one AssignLoad on unequal loads.
type loadPlan struct {
	band, floor float64
	budget      int // moves left; < 0: no limit
	members     []Member
	c           []float64 // capacity
	e           []float64 // partition loads
	owner       []int32   // live owner or -1
	target      []int32
	l           []float64 // member load (of target)
	cnt         []int     // member partitions (of target)
	pos         []int     // member partitions of load > 0 (of target)
	ded         []int32   // per member: the partition it is dedicated to, or -1
}

func newLoadPlan(members []Member, e []float64, owner []int32, o LoadOptions) *loadPlan {
	n := len(members)
	lp := &loadPlan{
		band: o.Band, floor: max(o.Floor, 0), budget: -1, members: members, e: e,
		c: make([]float64, n), l: make([]float64, n), cnt: make([]int, n), pos: make([]int, n),
		ded: make([]int32, n), owner: make([]int32, len(e)), target: make([]int32, len(e)),
	}
	if !(lp.band > 0) || math.IsInf(lp.band, 0) {
		lp.band = defaultBand
	}
	if math.IsNaN(lp.floor) || math.IsInf(lp.floor, 0) {
		lp.floor = 0
	}
	if o.MaxMoves > 0 {
		lp.budget = o.MaxMoves
	}
	for m, mb := range members {
		lp.c[m] = float64(weightOf(mb))
		lp.ded[m] = -1
	}
	for i, w := range owner {
		if w < 0 || int(w) >= n {
			w = -1
		}
		lp.owner[i], lp.target[i] = w, w
		if w >= 0 {
			lp.add(int32(i), w)
		}
	}
	return lp
}

// add puts partition i on member m's account (not its target).
func (lp *loadPlan) add(i, m int32) {
	lp.l[m] += lp.e[i]
	lp.cnt[m]++
	if lp.e[i] > 0 {
		lp.pos[m]++
	}
}

// remove takes partition i off member m's account.
func (lp *loadPlan) remove(i, m int32) {
	lp.l[m] -= lp.e[i]
	lp.cnt[m]--
	if lp.e[i] > 0 {
		lp.pos[m]--
	}
}

// move sets partition i's target to m, if the budget allows a move (placing
// an unowned partition, or bringing one back to its owner, is always
// allowed). It reports whether it did.
func (lp *loadPlan) move(i, m int32) bool {
	from := lp.target[i]
	if from == m {
		return true
	}
	o := lp.owner[i]
	wasMove, isMove := o >= 0 && from != o, o >= 0 && m != o
	if isMove && !wasMove {
		if lp.budget == 0 {
			return false
		}
		if lp.budget > 0 {
			lp.budget--
		}
	} else if wasMove && !isMove && lp.budget >= 0 {
		lp.budget++
	}
	if from >= 0 {
		lp.remove(i, from)
	}
	lp.target[i] = m
	lp.add(i, m)
	return true
}

// rel is member m's relative load.
func (lp *loadPlan) rel(m int) float64 { return lp.l[m] / lp.c[m] }
