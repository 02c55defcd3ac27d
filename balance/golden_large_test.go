package balance

import (
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// largeDigest runs Assign on large inputs in several shapes (fresh, skewed
// owners, joins, leaves, weights, unsorted and duplicated partitions) and
// returns a digest of the outputs.
func largeDigest() string {
	h := sha256.New()
	rng := rand.New(rand.NewPCG(2024, 5))
	for c := range 12 {
		nm := 3 + rng.IntN(300)
		np := 300 + rng.IntN(20000)
		var in Input
		for range nm {
			w := 1
			if c%3 == 2 {
				w = rng.IntN(5)
			}
			in.Members = append(in.Members, Member{ID: fmt.Sprintf("s%016x", rng.Uint64()), Weight: w})
		}
		for i := range np {
			in.Partitions = append(in.Partitions, Partition{ID: fmt.Sprint(i)})
		}
		if c%4 == 1 { // unsorted, with duplicates
			rng.Shuffle(len(in.Partitions), func(i, j int) { in.Partitions[i], in.Partitions[j] = in.Partitions[j], in.Partitions[i] })
			in.Partitions = append(in.Partitions, in.Partitions[:50]...)
		}
		in.Owners = map[string]string{}
		for i := range np {
			switch r := rng.Float64(); {
			case c%4 == 0 && r < 0.9:
				// fresh-ish: mostly unowned
			case r < 0.3:
				in.Owners[fmt.Sprint(i)] = in.Members[rng.IntN(min(nm, 3))].ID // skewed
			case r < 0.35:
				in.Owners[fmt.Sprint(i)] = "gone"
			default:
				in.Owners[fmt.Sprint(i)] = in.Members[rng.IntN(nm)].ID
			}
		}
		out := Assign(in)
		keys := make([]string, 0, len(out))
		for k := range out {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			fmt.Fprintf(h, "%s=%s;", k, out[k])
		}
		fmt.Fprintf(h, "|%d|", c)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

// TestGoldenLarge pins the output of Assign on large inputs (TestGolden's
// input is too small to reach the radix sort of the pool and the slots): the
// digest was computed when the rest of the pool (what its ideal members have
// no room for) started going to the first member with room on the fill ring
// (fill.go). A change is a protocol change, as for TestGolden.
func TestGoldenLarge(t *testing.T) {
	const want = "5ffb43ce17b570b6cb0a80a4055476f2bdaf9fd9c34d524542d20facb0d1aecc"
	if got := largeDigest(); got != want {
		t.Fatalf("digest of large assignments changed:\n got %s\nwant %s", got, want)
	}
}
