package balance

import (
	"fmt"
	"maps"
	"math/big"
	"math/rand/v2"
	"slices"
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
