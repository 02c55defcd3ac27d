package balance

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSortSlots checks sortSlots against slices.SortFunc with the same
// comparison: positions spread evenly (hashes), all alike in their top
// bits (ids chosen to collide), many equal (ties), at every size around
// the one where it changes method.
func TestSortSlots(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tie := func(a, b slot) int {
		if c := cmp.Compare(a.m, b.m); c != 0 {
			return c
		}
		return cmp.Compare(a.k, b.k)
	}
	want := func(s []slot) []slot {
		w := slices.Clone(s)
		slices.SortFunc(w, func(a, b slot) int {
			if c := cmp.Compare(a.pos, b.pos); c != 0 {
				return c
			}
			return tie(a, b)
		})
		return w
	}
	kinds := map[string]func() uint64{
		"spread":    rng.Uint64,
		"top alike": func() uint64 { return 0xabcd<<48 | rng.Uint64()>>20 },
		"few":       func() uint64 { return rng.Uint64N(5) << 60 },
		"low bits":  func() uint64 { return rng.Uint64N(1000) },
	}
	var buf []slot
	for name, pos := range kinds {
		for _, n := range []int{0, 1, 255, 256, 257, 1000, 4097, 100_000} {
			s := make([]slot, n)
			for i := range s {
				s[i] = slot{pos: pos(), m: int32(rng.IntN(50)), k: int32(i)}
			}
			w := want(s)
			buf = sortSlots(s, buf, tie)
			if !slices.Equal(s, w) {
				t.Fatalf("%s, %d slots: not in the order of slices.SortFunc", name, n)
			}
		}
	}
}

// BenchmarkSortSlots sorts the ring of a 100,000-partition ideal.
func BenchmarkSortSlots(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	src := make([]slot, 100_000)
	for i := range src {
		src[i] = slot{pos: rng.Uint64(), m: int32(i % 16), k: int32(i / 16)}
	}
	s := make([]slot, len(src))
	var buf []slot
	tie := func(a, b slot) int { return cmp.Compare(a.k, b.k) }
	b.ReportAllocs()
	for b.Loop() {
		copy(s, src)
		buf = sortSlots(s, buf, tie)
	}
}

// TestSelectHashesPicksTheLeast checks selectHashes against a sort: the
// same slots first, on hashes spread evenly (its bounds hold), alike in
// their top bits or few (they miss), with ties, at every k.
func TestSelectHashesPicksTheLeast(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	tie := func(a, b slot) int { return cmp.Compare(a.m, b.m) }
	less := func(a, b slot) int {
		if c := cmp.Compare(a.pos, b.pos); c != 0 {
			return c
		}
		return tie(a, b)
	}
	for trial := range 3000 {
		n := 1 + rng.IntN(2000)
		s := make([]slot, n)
		for i := range s {
			pos := rng.Uint64()
			switch trial % 4 {
			case 1:
				pos = 0xabcd<<48 | pos>>20 // alike in their top bits
			case 2:
				pos %= 16 // few, many ties
			}
			s[i] = slot{pos: pos, m: int32(i)}
		}
		k := rng.IntN(n + 1)
		if trial%3 == 0 {
			k = n - rng.IntN(min(n, 100)) // most kept, as for members over quota
		}
		got := slices.Clone(s)
		selectHashes(got, k, tie)
		want := slices.SortedFunc(slices.Values(s), less)
		gotK := slices.SortedFunc(slices.Values(got[:k]), less)
		if !slices.Equal(gotK, want[:k]) {
			t.Fatalf("trial %d: n %d k %d: selected other slots than the %d least", trial, n, k, k)
		}
		if all := slices.SortedFunc(slices.Values(got), less); !slices.Equal(all, want) {
			t.Fatalf("trial %d: selectHashes lost or duplicated slots", trial)
		}
	}
}

// TestSameString: one string, equal strings of their own bytes, strings
// that differ in length or bytes.
func TestSameString(t *testing.T) {
	a := "partition-000042"
	b := string([]byte(a)) // equal, other bytes
	for _, c := range []struct {
		x, y string
		want bool
	}{{a, a, true}, {a, b, true}, {a, a[:5], false}, {a, "partition-000043", false}, {"", "", true}} {
		if got := sameString(c.x, c.y); got != c.want {
			t.Errorf("sameString(%q, %q) = %v, want %v", c.x, c.y, got, c.want)
		}
	}
}
