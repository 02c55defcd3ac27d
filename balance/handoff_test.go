package balance

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestHandoffKeepsTarget: a fleet part way through carrying out an
// assignment (some partitions released by members that hand them off, some
// of those and of the unowned ones claimed by their target) is given the
// same assignment again, whichever moves are done: members that plan at
// different moments of a rebalance agree. Joins, crashes and leaves,
// weighted or not, in several steps.
func TestHandoffKeepsTarget(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 12))
	for iter := range 300 {
		nm := 2 + rng.IntN(40)
		np := rng.IntN(4000)
		var in Input
		weight := func() int {
			if iter%3 == 2 {
				return 1 + rng.IntN(4)
			}
			return 1
		}
		for i := range nm {
			in.Members = append(in.Members, Member{ID: fmt.Sprintf("m%d", i), Weight: weight()})
		}
		for i := range np {
			in.Partitions = append(in.Partitions, Partition{ID: fmt.Sprint(i)})
		}
		in.Owners = Assign(in) // balanced
		change := "join"
		switch iter % 4 {
		case 0, 1:
			for i := range 1 + rng.IntN(10) {
				in.Members = append(in.Members, Member{ID: fmt.Sprintf("n%d", i), Weight: weight()})
			}
		case 2:
			change = "crash"
			k := 1 + rng.IntN(nm-1)
			in.Members = in.Members[k:] // their records name members that are gone
		case 3:
			change = "join and crash"
			in.Members = in.Members[1:]
			in.Members = append(in.Members, Member{ID: "n0", Weight: weight()})
		}
		want := Assign(in)
		for step := range 4 {
			owners := map[string]string{}
			for p, m := range in.Owners {
				owners[p] = m
			}
			release, claim := rng.Float64(), rng.Float64()
			for _, pt := range in.Partitions {
				p := pt.ID
				m, ok := owners[p]
				if ok && m == want[p] {
					continue
				}
				if ok && rng.Float64() < release {
					delete(owners, p) // handed off (or its owner's record, if gone, stays)
					ok = false
				}
				if (!ok || !known(in.Members, m)) && rng.Float64() < claim {
					owners[p] = want[p]
				}
			}
			in.Owners = owners
			got := Assign(in)
			for p, m := range want {
				if got[p] != m {
					t.Fatalf("iter %d (%s, %d members, %d partitions), step %d: partition %s goes to %s, not %s as at the start",
						iter, change, len(in.Members), np, step, p, got[p], m)
				}
			}
		}
	}
}

func known(ms []Member, id string) bool {
	for _, m := range ms {
		if m.ID == id {
			return true
		}
	}
	return false
}

// TestIdealsCached: an Assigner that sees several memberships in turn (more
// than it keeps ideals for), with partial owners, answers as a new one does
// that computes every ideal itself.
func TestIdealsCached(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var parts []Partition
	for i := range 3000 {
		parts = append(parts, Partition{ID: fmt.Sprintf("p%05d", i)})
	}
	var shapes [][]Member
	for s := range maxIdeals + 2 {
		var ms []Member
		for i := range 3 + s {
			ms = append(ms, Member{ID: fmt.Sprintf("m%02d", i), Weight: 1 + (i+s)%2})
		}
		shapes = append(shapes, ms)
	}
	var cached Assigner
	for iter := range 200 {
		ms := shapes[rng.IntN(len(shapes))]
		owner := make([]int32, len(parts))
		frac := rng.Float64()
		for i := range owner {
			owner[i] = -1
			if rng.Float64() < frac {
				owner[i] = int32(rng.IntN(len(ms)))
			}
		}
		got, err := cached.AssignSorted(ms, parts, owner, nil)
		if err != nil {
			t.Fatal(err)
		}
		var fresh Assigner
		want, err := fresh.AssignSorted(ms, parts, owner, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("iter %d (%d members, %.0f%% owned): partition %d goes to %d with cached ideals, %d without", iter, len(ms), frac*100, i, got[i], want[i])
			}
		}
	}
}
