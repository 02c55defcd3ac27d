package balance

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestAssignLoadHotAlone: a partition hotter than a fair share ends alone
// on a member (its other partitions carry at most Band/2 of its load), and
// the other members are within the band of their mean.
func TestAssignLoadHotAlone(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 4))
	for iter := range 300 {
		nm := 2 + rng.IntN(20)
		np := nm * (10 + rng.IntN(30))
		members, parts, owner := sortedFleet(rng, nm, np, 1, false)
		load := make([]float64, np)
		hot, rest := rng.IntN(np), 0.0
		for i := range load {
			load[i] = 0.5 + rng.Float64()
			if i != hot {
				rest += load[i]
			}
		}
		// Hotter than a fair share: load > (rest + load) / nm.
		load[hot] = rest / float64(nm-1) * (1.2 + 3*rng.Float64())
		cur, _ := settle(t, members, parts, owner, load, LoadOptions{})
		l, _ := memberLoads(members, parts, cur, load)
		if others := l[cur[hot]] - load[hot]; others > 0.05*load[hot] {
			t.Fatalf("iter %d: the hot partition's member holds %.3f besides its %.3f", iter, others, load[hot])
		}
		rest, n := 0.0, 0
		for m := range members {
			if m != int(cur[hot]) {
				rest += l[m]
				n++
			}
		}
		mu := rest / float64(n)
		for m := range members {
			if m != int(cur[hot]) && math.Abs(l[m]-mu) > 0.10*mu {
				t.Fatalf("iter %d: member %d has %.2f, the others' mean %.2f", iter, m, l[m], mu)
			}
		}
	}
}

// TestAssignLoadHotToWidest: a partition alone on a small member, hotter
// than a large member's fair share, goes to a large member, which gives up
// its other partitions but for the slack (Band/2 of the hot one's load).
func TestAssignLoadHotToWidest(t *testing.T) {
	members := []Member{{ID: "a", Weight: 1}, {ID: "b", Weight: 4}, {ID: "c", Weight: 4}}
	parts := partitions(41)
	owner := make([]int32, 41)
	load := make([]float64, 41)
	owner[0], load[0] = 0, 40 // alone on a (capacity 1); fair share of b: 35.6
	for i := 1; i < 41; i++ {
		owner[i], load[i] = int32(1+i%2), 1
	}
	var a Assigner
	got, err := a.AssignLoad(members, parts, owner, load, LoadOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	hot := got[0]
	if members[hot].Weight != 4 {
		t.Fatalf("the hot partition stays on %s (capacity %d)", members[hot].ID, members[hot].Weight)
	}
	others := 0.0
	for i := 1; i < 41; i++ {
		if got[i] == hot {
			others += load[i]
		}
	}
	if others > 0.05*load[0] {
		t.Fatalf("the hot partition's member holds %.0f besides it", others)
	}
}

// BenchmarkAssignLoad: one plan of 100 members on 100,000 partitions of
// Zipf loads, from the count balance (the first plan, which moves) and
// from its result (a plan that finds the fleet in the band).
func BenchmarkAssignLoad(b *testing.B) {
	rng := rand.New(rand.NewPCG(31, 8))
	members, _, _ := sortedFleet(rng, 100, 0, 1, false)
	parts := make([]Partition, 100000)
	for i := range parts {
		parts[i] = Partition{ID: fmt.Sprintf("p%06d", i), Weight: 1}
	}
	none := make([]int32, len(parts))
	for i := range none {
		none[i] = -1
	}
	var a Assigner
	count, err := a.AssignSorted(members, parts, none, nil)
	if err != nil {
		b.Fatal(err)
	}
	count = slices.Clone(count)
	load := zipfLoads(rng, len(parts), 1.1)
	settled, err := a.AssignLoad(members, parts, count, load, LoadOptions{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	settled = slices.Clone(settled)
	for _, c := range []struct {
		name  string
		owner []int32
	}{{"first", count}, {"settled", settled}} {
		b.Run(c.name, func(b *testing.B) {
			var t []int32
			for b.Loop() {
				t, _ = a.AssignLoad(members, parts, c.owner, load, LoadOptions{}, t)
			}
		})
	}
}

// TestAssignLoadHotToMiddle: a partition too big for the round's aim on
// any member, and for the fair share of a small one, goes alone to the
// member where its relative load stays below the hottest partition's and
// that gives up the fewest partitions for it: here one of capacity 2 with
// 10 partitions, not one of capacity 4 with 30 (which gave up all 30).
func TestAssignLoadHotToMiddle(t *testing.T) {
	members := []Member{{ID: "a", Weight: 1}, {ID: "b", Weight: 2}, {ID: "c", Weight: 4}, {ID: "d", Weight: 4}}
	parts := partitions(42)
	owner := make([]int32, 42)
	load := make([]float64, 42)
	owner[0], load[0] = 2, 160 // alone on c: 40 per unit of capacity
	owner[1], load[1] = 0, 60  // on a; 30 per unit on b, 15 on d
	for i := 2; i < 42; i++ {
		owner[i], load[i] = 3, 1
		if i < 12 {
			owner[i] = 1
		}
	}
	var a Assigner
	got, err := a.AssignLoad(members, parts, owner, load, LoadOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got[0] != 2 || got[1] != 1 {
		t.Fatalf("the two hot partitions on %s and %s; want c and b", members[got[0]].ID, members[got[1]].ID)
	}
	others := 0.0
	for i := 2; i < 42; i++ {
		if got[i] == 1 {
			others += load[i]
		}
	}
	if others > 0.05*load[1] {
		t.Fatalf("b holds %.0f besides its hot partition", others)
	}
	if m := movesOf(owner, got, len(members)); m > 12 {
		t.Fatalf("%d moves; want at most 12", m)
	}
}
