package balance

// AssignSorted against Assign, its input checks, a partial fill, slot selection; and its benchmark.

import (
	"cmp"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestAssignSortedMatchesAssign checks that Assigner.AssignSorted returns
// what Assign returns, on random inputs and with one Assigner reused.
func TestAssignSortedMatchesAssign(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	var a Assigner
	var target []int32
	for iter := range 520 {
		o := genOpts{maxMembers: 12, maxParts: 200, weighted: iter%2 == 0}
		if iter >= 500 { // large enough for the radix sorts
			o.maxMembers, o.maxParts = 200, 5000
		}
		in := genInput(rng, o)
		// Sorted, de-duplicated copies (first occurrence wins, as in Assign).
		var members []Member
		seen := map[string]bool{}
		for _, m := range in.Members {
			if !seen[m.ID] {
				seen[m.ID] = true
				members = append(members, m)
			}
		}
		slices.SortFunc(members, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
		var ps []Partition
		for _, p := range in.Partitions {
			if !seen["p:"+p.ID] {
				seen["p:"+p.ID] = true
				ps = append(ps, p)
			}
		}
		slices.SortFunc(ps, func(a, b Partition) int { return strings.Compare(a.ID, b.ID) })
		owner := make([]int32, len(ps))
		for i, p := range ps {
			owner[i] = -1
			if o, ok := in.Owners[p.ID]; ok {
				if j, ok := slices.BinarySearchFunc(members, o, func(m Member, id string) int { return strings.Compare(m.ID, id) }); ok {
					owner[i] = int32(j)
				}
			}
		}
		var err error
		target, err = a.AssignSorted(members, ps, owner, target)
		if err != nil {
			t.Fatal(err)
		}
		want := Assign(in)
		got := map[string]string{}
		for i, m := range target {
			got[ps[i].ID] = members[m].ID
		}
		if len(members) == 0 {
			if len(target) != 0 {
				t.Fatalf("iteration %d: %d targets without members", iter, len(target))
			}
			continue
		}
		if !maps.Equal(got, want) {
			t.Fatalf("iteration %d: AssignSorted differs from Assign\n got %v\nwant %v", iter, got, want)
		}
	}
	if _, err := a.AssignSorted([]Member{{ID: "b"}, {ID: "a"}}, nil, nil, nil); err == nil {
		t.Error("unsorted members accepted")
	}
	if _, err := a.AssignSorted([]Member{{ID: "a"}}, []Partition{{ID: "x"}, {ID: "x"}}, []int32{0, 0}, nil); err == nil {
		t.Error("duplicate partitions accepted")
	}
	if _, err := a.AssignSorted([]Member{{ID: "a"}}, []Partition{{ID: "x"}}, nil, nil); err == nil {
		t.Error("owner of the wrong length accepted")
	}
}

func BenchmarkAssignSorted(b *testing.B) {
	const nm, np = 1000, 100_000
	in := benchInput(nm, np, nil)
	slices.SortFunc(in.Members, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	slices.SortFunc(in.Partitions, func(a, b Partition) int { return strings.Compare(a.ID, b.ID) })
	for _, c := range []struct {
		name  string
		owner func(i int) int32
	}{
		{"fresh", func(int) int32 { return -1 }},
		{"balanced", func(i int) int32 { return int32(i % nm) }},
		{"half-placed", func(i int) int32 { // a first placement under way
			if i%2 == 0 {
				return -1
			}
			return int32(i % nm)
		}},
		{"join", func(i int) int32 { return int32(i % (nm - 1)) }},
		{"leave", func(i int) int32 {
			if i%nm == 0 {
				return -1
			}
			return int32(i % nm)
		}},
	} {
		owner := make([]int32, np)
		for i := range owner {
			owner[i] = c.owner(i)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var a Assigner
			var target []int32
			for b.Loop() {
				var err error
				if target, err = a.AssignSorted(in.Members, in.Partitions, owner, target); err != nil {
					b.Fatal(err)
				}
			}
		})
		if c.name == "fresh" {
			// A new Assigner every time: the ideal is computed, not
			// found among the Assigner's (what the first plan of a
			// member costs).
			b.Run("fresh-uncached", func(b *testing.B) {
				var target []int32
				for b.Loop() {
					var a Assigner
					var err error
					if target, err = a.AssignSorted(in.Members, in.Partitions, owner, target); err != nil {
						b.Fatal(err)
					}
				}
			})
			// One Assigner, a new membership every time (more than it
			// keeps ideals of): what a member pays for each membership
			// change of a group whose partitions stay the same.
			b.Run("new-membership", func(b *testing.B) {
				var a Assigner
				var target []int32
				i := 0
				for b.Loop() {
					ms := slices.Delete(slices.Clone(in.Members), i%(maxIdeals+1), i%(maxIdeals+1)+1)
					i++
					var err error
					if target, err = a.AssignSorted(ms, in.Partitions, owner, target); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// TestAssignSortedChecksOrder feeds one Assigner a sequence of partition
// lists, each a small change of the previous one (which AssignSorted only
// partly re-checks), and requires an error exactly when a list is not
// strictly sorted.
func TestAssignSortedChecksOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var a Assigner
	members := []Member{{ID: "a"}, {ID: "b"}}
	ids := []string{"p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7"}
	for iter := range 3000 {
		next := slices.Clone(ids)
		switch rng.IntN(4) {
		case 0: // swap two
			i, j := rng.IntN(len(next)), rng.IntN(len(next))
			next[i], next[j] = next[j], next[i]
		case 1: // replace one
			next[rng.IntN(len(next))] = fmt.Sprintf("p%d", rng.IntN(12))
		case 2: // drop one
			i := rng.IntN(len(next))
			next = slices.Delete(next, i, i+1)
		case 3: // start again sorted
			next = []string{"p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7"}[:4+rng.IntN(5)]
		}
		if len(next) == 0 {
			next = []string{"p0"}
		}
		ps := make([]Partition, len(next))
		for i, id := range next {
			ps[i] = Partition{ID: id}
		}
		sorted := true
		for i := 1; i < len(next); i++ {
			sorted = sorted && next[i-1] < next[i]
		}
		_, err := a.AssignSorted(members, ps, make([]int32, len(ps)), nil)
		if (err == nil) != sorted {
			t.Fatalf("iteration %d: %v: error %v, sorted %t", iter, next, err, sorted)
		}
		if sorted || rng.IntN(3) == 0 {
			ids = next
		}
	}
}

// TestPartialFillKeepsTarget: members that have claimed part of the
// assignment computed from nothing (the others' claims still on their way)
// are given that same assignment again, whichever part was claimed: members
// that read the group at different moments of a first placement agree.
func TestPartialFillKeepsTarget(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for iter := range 200 {
		nm := 1 + rng.IntN(40)
		np := rng.IntN(3000)
		var in Input
		for i := range nm {
			w := 1
			if iter%2 == 1 {
				w = 1 + rng.IntN(4)
			}
			in.Members = append(in.Members, Member{ID: fmt.Sprintf("m%d", i), Weight: w})
		}
		for i := range np {
			in.Partitions = append(in.Partitions, Partition{ID: fmt.Sprint(i)})
		}
		ideal := Assign(in)
		frac := rng.Float64()
		in.Owners = map[string]string{}
		for p, m := range ideal {
			if rng.Float64() < frac {
				in.Owners[p] = m
			}
		}
		got := Assign(in)
		for p, m := range ideal {
			if got[p] != m {
				t.Fatalf("iter %d (%d members, %d partitions, %.0f%% claimed): partition %s goes to %s, not %s as from nothing",
					iter, nm, np, frac*100, p, got[p], m)
			}
		}
	}
}

// TestSelectSlotsPicksTheLeast checks selectSlots against a sort: the same
// slots first, whatever the input's order, ties on pos included.
func TestSelectSlotsPicksTheLeast(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 2000 {
		n := 1 + rng.IntN(300)
		s := make([]slot, n)
		for i := range s {
			pos := rng.Uint64()
			if trial%3 == 0 {
				pos %= 8 // many equal positions: tie decides
			}
			s[i] = slot{pos: pos, m: int32(i)}
		}
		tie := func(a, b slot) int { return cmp.Compare(a.m, b.m) }
		k := rng.IntN(n + 1)
		got := slices.Clone(s)
		selectSlots(got, k, tie)
		want := slices.Clone(s)
		slices.SortFunc(want, func(a, b slot) int {
			if c := cmp.Compare(a.pos, b.pos); c != 0 {
				return c
			}
			return tie(a, b)
		})
		gotK := slices.Clone(got[:k])
		slices.SortFunc(gotK, func(a, b slot) int { return cmp.Compare(a.m, b.m) })
		wantK := slices.Clone(want[:k])
		slices.SortFunc(wantK, func(a, b slot) int { return cmp.Compare(a.m, b.m) })
		if !slices.Equal(gotK, wantK) {
			t.Fatalf("trial %d: n %d k %d: selected %v, want %v", trial, n, k, gotK, wantK)
		}
		all := slices.Clone(got)
		slices.SortFunc(all, func(a, b slot) int { return cmp.Compare(a.m, b.m) })
		if !slices.Equal(all, s) {
			t.Fatalf("trial %d: selectSlots lost or duplicated slots", trial)
		}
	}
}
