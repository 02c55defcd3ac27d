package balance

// MinMoves against a brute force, and on subsets.

import (
	"math"
	"math/rand/v2"
	"testing"
)

// bruteMinMoves enumerates every assignment of the partitions to members in
// which each member gets floor or ceil of its share, and returns the fewest
// moves (partitions whose valid current owner differs from the new owner).
func bruteMinMoves(in Input) int {
	members, parts := uniq(in)
	if len(members) == 0 {
		return 0
	}
	valid := validOwners(in)
	lo, hi := shareBounds(members, len(parts))
	counts := make([]int, len(members))
	best := math.MaxInt
	var rec func(i, moves int)
	rec = func(i, moves int) {
		if moves >= best {
			return
		}
		if i == len(parts) {
			for k, m := range members {
				if counts[k] < lo[m.ID] {
					return
				}
			}
			best = moves
			return
		}
		for k, m := range members {
			if counts[k] == hi[m.ID] {
				continue
			}
			counts[k]++
			d := 0
			if o, ok := valid[parts[i]]; ok && o != m.ID {
				d = 1
			}
			rec(i+1, moves+d)
			counts[k]--
		}
	}
	rec(0, 0)
	return best
}

func TestMinMovesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for it := range 400 {
		in := genInput(rng, genOpts{maxMembers: 4, maxParts: 8, weighted: it%2 == 0})
		want := bruteMinMoves(in)
		if got := MinMoves(in); got != want {
			t.Fatalf("iter %d: MinMoves=%d brute force=%d\ninput: %+v", it, got, want, in)
		}
		out := Assign(in)
		checkAssignment(t, in, out)
		if got := Moves(in, out); got != want {
			t.Fatalf("iter %d: Moves(Assign)=%d brute force=%d\ninput: %+v", it, got, want, in)
		}
	}
}

// TestMinMovesSubsets cross-checks MinMoves on larger inputs by trying every
// choice of which members get the ceil of their share (small member counts,
// up to thousands of partitions).
func TestMinMovesSubsets(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for it := range 200 {
		in := genInput(rng, genOpts{maxMembers: 9, maxParts: 2000, weighted: it%2 == 0})
		members, parts := uniq(in)
		if len(members) == 0 {
			continue
		}
		valid := validOwners(in)
		held := map[string]int{}
		for _, o := range valid {
			held[o]++
		}
		lo, hi := shareBounds(members, len(parts))
		best := math.MaxInt
		for mask := 0; mask < 1<<len(members); mask++ {
			sum, keep := 0, 0
			for k, m := range members {
				q := lo[m.ID]
				if mask&(1<<k) != 0 {
					if hi[m.ID] == q {
						sum = -1 << 40 // not allowed
					}
					q++
				}
				sum += q
				keep += min(held[m.ID], q)
			}
			if sum == len(parts) {
				best = min(best, len(valid)-keep)
			}
		}
		if got := MinMoves(in); got != best {
			t.Fatalf("iter %d: MinMoves=%d subsets=%d", it, got, best)
		}
	}
}

// ---------------------------------------------------------------------------
// Specific behaviour.
