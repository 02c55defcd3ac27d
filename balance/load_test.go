package balance

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// sortedFleet is a random fleet in AssignSorted's form: nm members (unit
// capacity, or random capacities if weighted), np partitions of weight pw,
// and owners in one of several shapes (some unowned, some skewed).
func sortedFleet(rng *rand.Rand, nm, np, pw int, weighted bool) ([]Member, []Partition, []int32) {
	members := make([]Member, nm)
	for i := range members {
		w := 1
		if weighted {
			w = 1 + rng.IntN(4)
		}
		members[i] = Member{ID: fmt.Sprintf("m%03d", i), Weight: w}
	}
	parts := make([]Partition, np)
	owner := make([]int32, np)
	shape := rng.IntN(4)
	for i := range parts {
		parts[i] = Partition{ID: fmt.Sprintf("p%05d", i), Weight: pw}
		switch {
		case nm == 0 || rng.IntN(10) < shape:
			owner[i] = -1
		case shape == 3:
			owner[i] = int32(rng.IntN(min(nm, 2)))
		default:
			owner[i] = int32(rng.IntN(nm))
		}
	}
	return members, parts, owner
}

// moves counts the partitions whose target differs from a live owner.
func movesOf(owner, target []int32, n int) int {
	k := 0
	for i, o := range owner {
		if o >= 0 && int(o) < n && target[i] != o {
			k++
		}
	}
	return k
}

func TestAssignLoadEqualIsCount(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 1))
	for iter := range 1000 {
		nm, np := rng.IntN(12), rng.IntN(300)
		pw := rng.IntN(3) // every weight the same (<= 0 is 1)
		members, parts, owner := sortedFleet(rng, nm, np, pw, rng.IntN(2) == 0)
		var load []float64
		if v := rng.IntN(3); v > 0 {
			c := []float64{0, 0.37, 5}[rng.IntN(3)]
			load = make([]float64, np)
			for i := range load {
				load[i] = c
			}
		}
		var a, b Assigner
		want, err := a.AssignSorted(members, parts, owner, nil)
		if err != nil {
			t.Fatal(err)
		}
		want = slices.Clone(want)
		got, err := b.AssignLoad(members, parts, owner, load, LoadOptions{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("iter %d: equal loads: AssignLoad differs from AssignSorted", iter)
		}
		in := inputOf(members, parts, owner)
		if m, min := movesOf(owner, got, nm), MinMoves(in); m != min {
			t.Fatalf("iter %d: %d moves, minimum %d", iter, m, min)
		}
	}
}

// inputOf is the map form of a sorted fleet.
func inputOf(members []Member, parts []Partition, owner []int32) Input {
	in := Input{Members: members, Partitions: parts, Owners: map[string]string{}}
	for i, o := range owner {
		if o >= 0 {
			in.Owners[parts[i].ID] = members[o].ID
		}
	}
	return in
}

// TestAssignLoadEqualBudget: with equal loads and a budget, calls made on
// the fleet that carried out the previous call's moves reach the count
// balance's assignment with its minimal number of moves in all.
func TestAssignLoadEqualBudget(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 2))
	for iter := range 300 {
		nm, np := 1+rng.IntN(10), rng.IntN(300)
		members, parts, owner := sortedFleet(rng, nm, np, 1, rng.IntN(2) == 0)
		var a Assigner
		want, _ := a.AssignSorted(members, parts, owner, nil)
		want = slices.Clone(want)
		min := MinMoves(inputOf(members, parts, owner))
		k := 1 + rng.IntN(5)
		cur, total := slices.Clone(owner), 0
		for round := 0; ; round++ {
			got, err := a.AssignLoad(members, parts, cur, nil, LoadOptions{MaxMoves: k}, nil)
			if err != nil {
				t.Fatal(err)
			}
			m := movesOf(cur, got, nm)
			if m > k {
				t.Fatalf("iter %d: %d moves, budget %d", iter, m, k)
			}
			total += m
			copy(cur, got)
			if m == 0 && !slices.Contains(cur, -1) || round > np+2 {
				break
			}
		}
		if !slices.Equal(cur, want) || total != min {
			t.Fatalf("iter %d: budget %d: %d moves in all (minimum %d), same target %v", iter, k, total, min, slices.Equal(cur, want))
		}
	}
}

// zipfLoads returns n loads of a Zipf law of exponent s, shuffled.
func zipfLoads(rng *rand.Rand, n int, s float64) []float64 {
	l := make([]float64, n)
	for i := range l {
		l[i] = 1000 * math.Pow(float64(i+1), -s)
	}
	rng.Shuffle(n, func(i, j int) { l[i], l[j] = l[j], l[i] })
	return l
}

// randomLoads is one of several load shapes for property tests.
func randomLoads(rng *rand.Rand, np int) []float64 {
	switch rng.IntN(4) {
	case 0:
		return zipfLoads(rng, np, 1.1)
	case 1:
		return zipfLoads(rng, np, 0.5)
	default:
		l := make([]float64, np)
		for i := range l {
			l[i] = rng.Float64() * 10
			if rng.IntN(20) == 0 {
				l[i] = 0
			}
		}
		return l
	}
}

func TestAssignLoadProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 3))
	for iter := range 1000 {
		nm, np := rng.IntN(15), rng.IntN(400)
		members, parts, owner := sortedFleet(rng, nm, np, 1, rng.IntN(2) == 0)
		for i := range parts {
			parts[i].Weight = rng.IntN(3)
		}
		load := randomLoads(rng, np)
		o := LoadOptions{MaxMoves: rng.IntN(20), Band: []float64{0, 0.05, 0.2}[rng.IntN(3)]}
		var a, b Assigner
		got, err := a.AssignLoad(members, parts, owner, load, o, nil)
		if err != nil {
			t.Fatal(err)
		}
		got = slices.Clone(got)
		// Determinism: another Assigner, and the same one again.
		for _, x := range []*Assigner{&b, &a} {
			again, _ := x.AssignLoad(members, parts, slices.Clone(owner), slices.Clone(load), o, nil)
			if !slices.Equal(again, got) {
				t.Fatalf("iter %d: two calls differ", iter)
			}
		}
		if nm == 0 {
			if len(got) != 0 {
				t.Fatalf("iter %d: no members but %d targets", iter, len(got))
			}
			continue
		}
		if len(got) != np {
			t.Fatalf("iter %d: %d targets for %d partitions", iter, len(got), np)
		}
		for i, m := range got {
			if m < 0 || int(m) >= nm {
				t.Fatalf("iter %d: partition %d has target %d", iter, i, m)
			}
		}
		if o.MaxMoves > 0 && movesOf(owner, got, nm) > o.MaxMoves {
			t.Fatalf("iter %d: %d moves, budget %d", iter, movesOf(owner, got, nm), o.MaxMoves)
		}
	}
}

// settle calls AssignLoad until it moves nothing (at most 50 times more
// than there are partitions) and
// returns the assignment reached and the moves made.
func settle(t *testing.T, members []Member, parts []Partition, owner []int32, load []float64, o LoadOptions) ([]int32, int) {
	t.Helper()
	var a Assigner
	cur, total := slices.Clone(owner), 0
	for range len(parts) + 50 {
		got, err := a.AssignLoad(members, parts, cur, load, o, nil)
		if err != nil {
			t.Fatal(err)
		}
		m := movesOf(cur, got, len(members))
		copy(cur, got)
		total += m
		if m == 0 {
			return cur, total
		}
	}
	t.Fatalf("no fixed point after %d calls", len(parts)+50)
	return nil, 0
}

// memberLoads returns each member's load and partitions of load > 0.
func memberLoads(members []Member, parts []Partition, target []int32, load []float64) ([]float64, []int) {
	l, pos := make([]float64, len(members)), make([]int, len(members))
	e, _ := effectiveLoads(parts, load)
	for i, m := range target {
		l[m] += e[i]
		if e[i] > 0 {
			pos[m]++
		}
	}
	return l, pos
}

// TestAssignLoadNoiseMovesNothing: once a fleet is balanced, +-20 %
// multiplicative noise on every partition's load moves nothing.
func TestAssignLoadNoiseMovesNothing(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 5))
	for iter := range 24 {
		nm := 2 + rng.IntN(20)
		np := nm * (100 + rng.IntN(100))
		members, parts, owner := sortedFleet(rng, nm, np, 1, rng.IntN(2) == 0)
		load := make([]float64, np)
		for i := range load {
			load[i] = 0.5 + 1.5*rng.Float64()
		}
		// A fleet the balance has spread: from unowned partitions, or from
		// members that hold all of them. (A fleet that was never out of
		// the band may sit near its edge, where noise can push it out.)
		for i := range owner {
			owner[i] = []int32{-1, 0, int32(i % 2)}[iter%3]
		}
		cur, _ := settle(t, members, parts, owner, load, LoadOptions{})
		var a Assigner
		noisy := make([]float64, np)
		for draw := range 25 {
			for i := range noisy {
				noisy[i] = load[i] * (0.8 + 0.4*rng.Float64())
			}
			got, err := a.AssignLoad(members, parts, cur, noisy, LoadOptions{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if m := movesOf(cur, got, nm); m != 0 {
				l, _ := memberLoads(members, parts, cur, load)
				ln, _ := memberLoads(members, parts, cur, noisy)
				for m := range members {
					t.Logf("member %d cap %d: load %.1f noisy %.1f", m, members[m].Weight, l[m]/float64(members[m].Weight), ln[m]/float64(members[m].Weight))
				}
				t.Fatalf("iter %d draw %d: noise moved %d partitions", iter, draw, m)
			}
		}
	}
}

// TestAssignLoadFloor: below the floor, however uneven, nothing moves.
func TestAssignLoadFloor(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 6))
	members, parts, owner := sortedFleet(rng, 4, 40, 1, false)
	for i := range owner {
		owner[i] = int32(i % 4)
	}
	load := make([]float64, 40)
	for i := range load {
		load[i] = 0.001 * float64(i%4+1) // member 3 has four times member 0's load
	}
	var a Assigner
	got, err := a.AssignLoad(members, parts, owner, load, LoadOptions{Floor: 0.05}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m := movesOf(owner, got, 4); m != 0 {
		t.Fatalf("floor 0.05, member loads within 0.02: %d moves", m)
	}
	got, _ = a.AssignLoad(members, parts, owner, load, LoadOptions{}, nil)
	if movesOf(owner, got, 4) == 0 {
		t.Fatalf("no floor: the uneven fleet should move")
	}
}

// TestAssignLoadReachesBand: from any start, with many small partitions,
// the settled fleet has every member within the band of the mean.
func TestAssignLoadReachesBand(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 7))
	for iter := range 60 {
		nm := 2 + rng.IntN(30)
		np := nm * (20 + rng.IntN(40))
		members, parts, owner := sortedFleet(rng, nm, np, 1, rng.IntN(2) == 0)
		load := make([]float64, np)
		for i := range load {
			load[i] = rng.Float64()
		}
		cur, _ := settle(t, members, parts, owner, load, LoadOptions{MaxMoves: 1 + rng.IntN(30)})
		l, _ := memberLoads(members, parts, cur, load)
		var L, C float64
		for m := range members {
			L += l[m]
			C += float64(members[m].Weight)
		}
		mu := L / C
		for m := range members {
			if r := l[m] / float64(members[m].Weight); math.Abs(r-mu) > 0.10*mu {
				t.Fatalf("iter %d: member %d at %.3f of the mean", iter, m, r/mu)
			}
		}
	}
}

// TestImproves: by load is taken over by count only when it lowers the
// most loaded member by more than the band: not for nearly equal loads,
// nor for partitions too few to spread finer, nor within the floor.
func TestImproves(t *testing.T) {
	members := []Member{{ID: "a", Weight: 1}, {ID: "b", Weight: 1}, {ID: "c", Weight: 1}}
	parts := []Partition{{ID: "0"}, {ID: "1"}, {ID: "2"}, {ID: "3"}}
	cases := []struct {
		name            string
		byCount, byLoad []int32
		load            []float64
		o               LoadOptions
		want            bool
	}{
		{"two hot on a", []int32{0, 0, 1, 2}, []int32{0, 1, 2, 2}, []float64{10, 10, 1, 1}, LoadOptions{}, true},
		{"nearly equal", []int32{0, 0, 1, 2}, []int32{0, 1, 1, 2}, []float64{1, 0.97, 1.02, 1}, LoadOptions{}, false},
		{"small gain", []int32{0, 0, 1, 2}, []int32{0, 1, 2, 2}, []float64{1.05, 1, 1, 1}, LoadOptions{Band: 0.5}, false},
		{"within the floor", []int32{0, 0, 1, 2}, []int32{0, 1, 2, 2}, []float64{0.1, 0.1, 0.01, 0.01}, LoadOptions{Floor: 1}, false},
		// The hot partition 0 sets the top (10) either way; by count the
		// rest are 3 against 0.2, by load 1.6 and 1.6.
		{"a hot partition hides the rest", []int32{0, 1, 1, 2}, []int32{0, 1, 2, 2}, []float64{10, 1.6, 1.4, 0.2}, LoadOptions{}, true},
	}
	for _, c := range cases {
		if got := Improves(members, parts, c.byCount, c.byLoad, c.load, c.o); got != c.want {
			top, bound := Spread(members, parts, c.byCount, c.load)
			t.Errorf("%s: Improves = %v; want %v (by count: top %v, bound %v)", c.name, got, c.want, top, bound)
		}
	}
}
