package balance

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// ---------------------------------------------------------------------------
// Random input generation and reference helpers (independent of the package
// internals).

type genOpts struct {
	maxMembers, maxParts int
	weighted             bool
}

// genInput builds a random input. Duplicate members are exact copies so that
// the result must not depend on slice order.
func genInput(rng *rand.Rand, o genOpts) Input {
	nm := rng.IntN(o.maxMembers + 1)
	np := rng.IntN(o.maxParts + 1)
	var in Input
	for i := range nm {
		w := 1
		if o.weighted {
			w = rng.IntN(8) - 2 // -2..5; <= 0 means 1
		} else if rng.IntN(10) == 0 {
			w = 0 // 0 also means 1
		}
		in.Members = append(in.Members, Member{ID: fmt.Sprintf("m%03d", i), Weight: w})
	}
	for i := range np {
		in.Partitions = append(in.Partitions, Partition{ID: fmt.Sprintf("p%05d", i), Weight: rng.IntN(3)})
	}
	// Duplicates.
	if nm > 0 && rng.IntN(3) == 0 {
		for range rng.IntN(5) + 1 {
			in.Members = append(in.Members, in.Members[rng.IntN(nm)])
		}
	}
	if np > 0 && rng.IntN(3) == 0 {
		for range rng.IntN(20) + 1 {
			in.Partitions = append(in.Partitions, in.Partitions[rng.IntN(np)])
		}
	}
	// Owners, with several shapes: uniform, skewed to a few members, or
	// everything on one member.
	in.Owners = map[string]string{}
	shape := rng.IntN(4)
	pUnowned := rng.Float64() * 0.5
	hot := 1 + rng.IntN(3)
	for i := range np {
		pid := in.Partitions[i].ID
		r := rng.Float64()
		switch {
		case r < pUnowned:
			// unowned
		case r < pUnowned+0.05:
			in.Owners[pid] = "ghost-" + fmt.Sprint(rng.IntN(3)) // unknown member
		case nm == 0:
			in.Owners[pid] = "nobody"
		default:
			switch shape {
			case 0, 1:
				in.Owners[pid] = in.Members[rng.IntN(nm)].ID
			case 2:
				in.Owners[pid] = in.Members[rng.IntN(min(hot, nm))].ID
			case 3:
				in.Owners[pid] = in.Members[0].ID
			}
		}
	}
	// Owner entries for unknown partitions.
	for i := range rng.IntN(5) {
		in.Owners[fmt.Sprintf("zz-unknown-%d", i)] = "m000"
	}
	return in
}

// uniq returns the de-duplicated members (first wins, weight normalised) and
// partition IDs.
func uniq(in Input) (members []Member, parts []string) {
	seen := map[string]bool{}
	for _, m := range in.Members {
		if seen[m.ID] {
			continue
		}
		seen[m.ID] = true
		if m.Weight <= 0 {
			m.Weight = 1
		}
		members = append(members, m)
	}
	seen = map[string]bool{}
	for _, p := range in.Partitions {
		if !seen[p.ID] {
			seen[p.ID] = true
			parts = append(parts, p.ID)
		}
	}
	return members, parts
}

// shareBounds returns floor and ceil of P*w/W for every member.
func shareBounds(members []Member, P int) (lo, hi map[string]int) {
	lo, hi = map[string]int{}, map[string]int{}
	W := new(big.Int)
	for _, m := range members {
		W.Add(W, big.NewInt(int64(m.Weight)))
	}
	for _, m := range members {
		num := new(big.Int).Mul(big.NewInt(int64(P)), big.NewInt(int64(m.Weight)))
		q, r := new(big.Int).QuoRem(num, W, new(big.Int))
		lo[m.ID] = int(q.Int64())
		hi[m.ID] = lo[m.ID]
		if r.Sign() != 0 {
			hi[m.ID]++
		}
	}
	return lo, hi
}

// validOwners returns the current owners restricted to known partitions and
// known members.
func validOwners(in Input) map[string]string {
	members, parts := uniq(in)
	known := map[string]bool{}
	for _, m := range members {
		known[m.ID] = true
	}
	out := map[string]string{}
	for _, p := range parts {
		if o, ok := in.Owners[p]; ok && known[o] {
			out[p] = o
		}
	}
	return out
}

func shuffled(rng *rand.Rand, in Input) Input {
	out := Input{
		Members:    slices.Clone(in.Members),
		Partitions: slices.Clone(in.Partitions),
		Owners:     maps.Clone(in.Owners),
	}
	rng.Shuffle(len(out.Members), func(i, j int) { out.Members[i], out.Members[j] = out.Members[j], out.Members[i] })
	rng.Shuffle(len(out.Partitions), func(i, j int) { out.Partitions[i], out.Partitions[j] = out.Partitions[j], out.Partitions[i] })
	return out
}

// checkAssignment verifies that out assigns every partition exactly once to a
// known member, that counts equal Quotas, and that quotas are fair.
func checkAssignment(t *testing.T, in Input, out map[string]string) {
	t.Helper()
	members, parts := uniq(in)
	if len(members) == 0 {
		if len(out) != 0 {
			t.Fatalf("no members but %d assignments", len(out))
		}
		return
	}
	if len(out) != len(parts) {
		t.Fatalf("assigned %d partitions, want %d", len(out), len(parts))
	}
	known := map[string]bool{}
	for _, m := range members {
		known[m.ID] = true
	}
	counts := map[string]int{}
	for _, p := range parts {
		o, ok := out[p]
		if !ok {
			t.Fatalf("partition %q not assigned", p)
		}
		if !known[o] {
			t.Fatalf("partition %q assigned to unknown member %q", p, o)
		}
		counts[o]++
	}
	quotas := Quotas(in)
	if len(quotas) != len(members) {
		t.Fatalf("Quotas has %d entries, want %d", len(quotas), len(members))
	}
	lo, hi := shareBounds(members, len(parts))
	sum := 0
	for _, m := range members {
		q := quotas[m.ID]
		sum += q
		if counts[m.ID] != q {
			t.Fatalf("member %q got %d partitions, quota %d", m.ID, counts[m.ID], q)
		}
		if q < lo[m.ID] || q > hi[m.ID] {
			t.Fatalf("member %q (weight %d) quota %d outside [%d,%d]", m.ID, m.Weight, q, lo[m.ID], hi[m.ID])
		}
	}
	if sum != len(parts) {
		t.Fatalf("quotas sum to %d, want %d", sum, len(parts))
	}
	unit := true
	for _, m := range members {
		unit = unit && m.Weight == 1
	}
	if unit {
		P, N := len(parts), len(members)
		for _, m := range members {
			if c := counts[m.ID]; c < P/N || c > (P+N-1)/N {
				t.Fatalf("unit weights: member %q got %d, want %d or %d", m.ID, c, P/N, (P+N-1)/N)
			}
		}
	}
}

// fairOwners builds a random assignment of in's partitions that is already
// fair: every member holds floor or ceil of its share and all partitions are
// owned.
func fairOwners(rng *rand.Rand, in Input) map[string]string {
	members, parts := uniq(in)
	if len(members) == 0 {
		return map[string]string{}
	}
	lo, hi := shareBounds(members, len(parts))
	counts := make([]int, len(members))
	var up []int
	sum := 0
	for i, m := range members {
		counts[i] = lo[m.ID]
		sum += counts[i]
		if hi[m.ID] > lo[m.ID] {
			up = append(up, i)
		}
	}
	rng.Shuffle(len(up), func(i, j int) { up[i], up[j] = up[j], up[i] })
	for _, i := range up[:len(parts)-sum] {
		counts[i]++
	}
	ps := slices.Clone(parts)
	rng.Shuffle(len(ps), func(i, j int) { ps[i], ps[j] = ps[j], ps[i] })
	owners := map[string]string{}
	k := 0
	for i, m := range members {
		for range counts[i] {
			owners[ps[k]] = m.ID
			k++
		}
	}
	return owners
}

// ---------------------------------------------------------------------------
// Property tests.

func TestAssignProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	iters := 300
	if testing.Short() {
		iters = 60
	}
	for it := range iters {
		opts := genOpts{maxMembers: 60, maxParts: 3000, weighted: it%3 == 0}
		if it%5 == 0 { // many small cases too
			opts.maxMembers, opts.maxParts = 6, 40
		}
		in := genInput(rng, opts)
		name := fmt.Sprintf("iter%d/members=%d/parts=%d/weighted=%v", it, len(in.Members), len(in.Partitions), opts.weighted)
		t.Run(name, func(t *testing.T) {
			out := Assign(in)
			checkAssignment(t, in, out)

			// Minimal moves.
			mv, minMv := Moves(in, out), MinMoves(in)
			if mv != minMv {
				t.Fatalf("Moves=%d MinMoves=%d", mv, minMv)
			}
			// Sticky: every member kept min(held, quota) of its partitions.
			valid := validOwners(in)
			quotas := Quotas(in)
			held, kept := map[string]int{}, map[string]int{}
			for p, o := range valid {
				held[o]++
				if out[p] == o {
					kept[o]++
				}
			}
			for m, h := range held {
				if want := min(h, quotas[m]); kept[m] != want {
					t.Fatalf("member %q held %d quota %d kept %d, want %d", m, h, quotas[m], kept[m], want)
				}
			}

			// Order independence.
			for range 2 {
				if got := Assign(shuffled(rng, in)); !maps.Equal(got, out) {
					t.Fatalf("shuffled input gave a different assignment")
				}
			}

			// Stability: feeding the output back moves nothing.
			in2 := in
			in2.Owners = out
			out2 := Assign(in2)
			if !maps.Equal(out2, out) {
				t.Fatalf("second application changed the assignment")
			}
			if m := Moves(in2, out2); m != 0 {
				t.Fatalf("second application: %d moves", m)
			}
			if m := MinMoves(in2); m != 0 {
				t.Fatalf("second application: MinMoves=%d", m)
			}

			// Already fair input: nothing moves, output == owners.
			in3 := in
			in3.Owners = fairOwners(rng, in)
			out3 := Assign(in3)
			checkAssignment(t, in3, out3)
			if m := Moves(in3, out3); m != 0 {
				t.Fatalf("already fair input: %d moves", m)
			}
			if m := MinMoves(in3); m != 0 {
				t.Fatalf("already fair input: MinMoves=%d", m)
			}
			if len(in.Members) > 0 && !maps.Equal(out3, in3.Owners) {
				t.Fatalf("already fair input: output differs from owners")
			}
		})
	}
}

// ---------------------------------------------------------------------------
// Independent MinMoves checks.

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
			// A new Assigner every time. uncached: the ideal is computed,
			// not found among the Assigner's nor the process's (what the
			// first plan of a member costs); shared: it is found among the
			// process's (a plan after its buffers were dropped by a GC).
			for _, v := range []struct {
				name  string
				alone bool
			}{{"fresh-uncached", true}, {"fresh-shared", false}} {
				b.Run(v.name, func(b *testing.B) {
					var target []int32
					loop := func() {
						for b.Loop() {
							var a Assigner
							var err error
							if target, err = a.AssignSorted(in.Members, in.Partitions, owner, target); err != nil {
								b.Fatal(err)
							}
						}
					}
					if v.alone {
						computeAlone(loop)
					} else {
						loop()
					}
				})
			}
			// One Assigner, a new membership every time (more than it
			// keeps ideals of, none from the process's): what a member
			// pays for each membership change of a group whose
			// partitions stay the same.
			b.Run("new-membership", func(b *testing.B) {
				var a Assigner
				var target []int32
				i := 0
				computeAlone(func() {
					for b.Loop() {
						ms := slices.Delete(slices.Clone(in.Members), i%(maxIdeals+1), i%(maxIdeals+1)+1)
						i++
						var err error
						if target, err = a.AssignSorted(ms, in.Partitions, owner, target); err != nil {
							b.Fatal(err)
						}
					}
				})
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
