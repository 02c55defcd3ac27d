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
