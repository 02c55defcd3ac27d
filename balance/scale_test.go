package balance

// Scale-out and scale-in, odd inputs, weights, the unowned, golden targets; and Assign's benchmark.

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"testing"
)

func units(n int) []Member {
	var ms []Member
	for i := range n {
		ms = append(ms, Member{ID: fmt.Sprintf("m%d", i)})
	}
	return ms
}

func parts(n int) []Partition {
	var ps []Partition
	for i := range n {
		ps = append(ps, Partition{ID: fmt.Sprintf("p%02d", i)})
	}
	return ps
}

func TestScaleOutAndIn(t *testing.T) {
	// 1 -> 4 members: 24 of 32 partitions move off the original member.
	in := Input{Members: units(1), Partitions: parts(32)}
	in.Owners = Assign(in)
	in.Members = units(4)
	out := Assign(in)
	checkAssignment(t, in, out)
	if m := Moves(in, out); m != 24 {
		t.Fatalf("1->4: %d moves, want 24", m)
	}
	if m := MinMoves(in); m != 24 {
		t.Fatalf("1->4: MinMoves %d, want 24", m)
	}

	// 4 -> 3: the leaver's 8 partitions get new owners; nobody else moves.
	in.Owners = out
	in.Members = units(3) // m3 left
	out2 := Assign(in)
	checkAssignment(t, in, out2)
	changed := 0
	for p, o := range out {
		if out2[p] != o {
			changed++
			if o != "m3" {
				t.Fatalf("partition %s moved off surviving member %s", p, o)
			}
		}
	}
	if changed != 8 {
		t.Fatalf("4->3: %d partitions changed owner, want 8", changed)
	}
	if m := Moves(in, out2); m != 0 { // m3's partitions are unowned now
		t.Fatalf("4->3: Moves=%d, want 0", m)
	}
}

func TestOddInputs(t *testing.T) {
	cases := map[string]Input{
		"empty":          {},
		"no members":     {Partitions: parts(5), Owners: map[string]string{"p00": "x"}},
		"no partitions":  {Members: units(3), Owners: map[string]string{"p00": "m0"}},
		"nil owners":     {Members: units(3), Partitions: parts(10)},
		"negative":       {Members: []Member{{ID: "a", Weight: -5}, {ID: "b", Weight: math.MinInt}}, Partitions: parts(7)},
		"huge weights":   {Members: []Member{{ID: "a", Weight: math.MaxInt}, {ID: "b", Weight: math.MaxInt}, {ID: "c", Weight: math.MaxInt - 1}, {ID: "d", Weight: 1}}, Partitions: parts(10)},
		"empty ids":      {Members: []Member{{ID: ""}, {ID: "a"}}, Partitions: []Partition{{ID: ""}, {ID: "x"}}, Owners: map[string]string{"": ""}},
		"unknown owners": {Members: units(2), Partitions: parts(4), Owners: map[string]string{"p00": "zz", "p01": "", "nope": "m0"}},
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			out := Assign(in)
			checkAssignment(t, in, out)
			if Moves(in, out) != MinMoves(in) {
				t.Fatalf("Moves %d != MinMoves %d", Moves(in, out), MinMoves(in))
			}
		})
	}
	if out := Assign(Input{Partitions: parts(3)}); out == nil || len(out) != 0 {
		t.Fatalf("no members: got %v, want empty non-nil map", out)
	}
}

func TestDuplicateMembersFirstWins(t *testing.T) {
	in := Input{
		Members:    []Member{{ID: "a", Weight: 3}, {ID: "b", Weight: 1}, {ID: "a", Weight: 1}},
		Partitions: parts(8),
	}
	q := Quotas(in)
	if q["a"] != 6 || q["b"] != 2 {
		t.Fatalf("quotas %v, want a:6 b:2", q)
	}
}

func TestWeightedQuotas(t *testing.T) {
	// Without owners: plain largest remainder. Shares 4/3 and 2/3.
	in := Input{Members: []Member{{ID: "a", Weight: 2}, {ID: "b", Weight: 1}}, Partitions: parts(2)}
	if q := Quotas(in); q["a"] != 1 || q["b"] != 1 {
		t.Fatalf("fresh quotas %v, want a:1 b:1", q)
	}
	// If a already holds both, a keeps ceil(4/3)=2 and nothing moves.
	in.Owners = map[string]string{"p00": "a", "p01": "a"}
	if q := Quotas(in); q["a"] != 2 || q["b"] != 0 {
		t.Fatalf("sticky quotas %v, want a:2 b:0", q)
	}
	if m := Moves(in, Assign(in)); m != 0 {
		t.Fatalf("moves %d, want 0", m)
	}
	// An exact share is never exceeded: weights 1,1,2 with 4 partitions.
	in = Input{Members: []Member{{ID: "a"}, {ID: "b"}, {ID: "c", Weight: 2}}, Partitions: parts(4),
		Owners: map[string]string{"p00": "a", "p01": "a", "p02": "a", "p03": "a"}}
	if q := Quotas(in); q["a"] != 1 || q["b"] != 1 || q["c"] != 2 {
		t.Fatalf("exact quotas %v, want a:1 b:1 c:2", q)
	}
	// Weights proportional: 1,2,3,4 with 100 partitions -> 10,20,30,40.
	in = Input{Members: []Member{{ID: "w1", Weight: 1}, {ID: "w2", Weight: 2}, {ID: "w3", Weight: 3}, {ID: "w4", Weight: 4}}, Partitions: parts(100)}
	if q := Quotas(in); q["w1"] != 10 || q["w2"] != 20 || q["w3"] != 30 || q["w4"] != 40 {
		t.Fatalf("proportional quotas %v", q)
	}
}

func TestUnownedSpread(t *testing.T) {
	// Fresh assignment of many partitions: exact quotas, and every member
	// gets a scattered (not contiguous) set of partition IDs.
	in := Input{Members: units(10), Partitions: parts(1000)}
	out := Assign(in)
	checkAssignment(t, in, out)
	run, maxRun := 0, 0
	for i := 1; i < 1000; i++ {
		if out[fmt.Sprintf("p%02d", i)] == out[fmt.Sprintf("p%02d", i-1)] {
			run++
		} else {
			run = 0
		}
		maxRun = max(maxRun, run)
	}
	if maxRun > 10 {
		t.Fatalf("assignment looks clustered: run of %d consecutive ids on one member", maxRun)
	}
}

// TestGolden pins the exact output for a small input. Every member of a fleet
// must compute the same assignment, so any change here (hash, tie-breaks,
// slot placement) is a protocol change that needs a coordinated rollout.
func TestGolden(t *testing.T) {
	in := Input{
		Members:    []Member{{ID: "alpha"}, {ID: "beta"}, {ID: "gamma", Weight: 2}},
		Partitions: parts(9),
		Owners:     map[string]string{"p00": "alpha", "p01": "alpha", "p02": "alpha", "p03": "alpha", "p04": "beta"},
	}
	got := Assign(in)
	want := golden
	if !maps.Equal(got, want) {
		keys := slices.Sorted(maps.Keys(got))
		for _, k := range keys {
			t.Logf("%q: %q,", k, got[k])
		}
		t.Fatalf("golden assignment changed")
	}
}

var golden = map[string]string{
	"p00": "alpha", "p01": "alpha", "p02": "gamma", "p03": "alpha", "p04": "beta",
	"p05": "beta", "p06": "gamma", "p07": "gamma", "p08": "gamma",
}

// ---------------------------------------------------------------------------
// Benchmarks.

func benchInput(nm, np int, owners func(p, m []string) map[string]string) Input {
	in := Input{}
	mids := make([]string, nm)
	for i := range nm {
		mids[i] = fmt.Sprintf("member-%04d", i)
		in.Members = append(in.Members, Member{ID: mids[i]})
	}
	pids := make([]string, np)
	for i := range np {
		pids[i] = fmt.Sprintf("partition-%06d", i)
		in.Partitions = append(in.Partitions, Partition{ID: pids[i]})
	}
	if owners != nil {
		in.Owners = owners(pids, mids)
	}
	return in
}

func BenchmarkAssign(b *testing.B) {
	const nm, np = 1000, 100_000
	cases := []struct {
		name   string
		owners func(p, m []string) map[string]string
	}{
		{"fresh", nil},
		{"balanced", func(p, m []string) map[string]string {
			o := make(map[string]string, len(p))
			for i, id := range p {
				o[id] = m[i%len(m)]
			}
			return o
		}},
		{"join", func(p, m []string) map[string]string { // last member is new
			o := make(map[string]string, len(p))
			for i, id := range p {
				o[id] = m[i%(len(m)-1)]
			}
			return o
		}},
		{"leave", func(p, m []string) map[string]string { // one owner is gone
			o := make(map[string]string, len(p))
			for i, id := range p {
				o[id] = m[i%len(m)]
				if i%len(m) == 0 {
					o[id] = "departed"
				}
			}
			return o
		}},
	}
	for _, c := range cases {
		in := benchInput(nm, np, c.owners)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Assign(in)
			}
		})
	}
}
