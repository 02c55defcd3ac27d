package balance

import (
	"slices"
	"strings"
	"testing"
)

// TestFirstPlansAllocs: a new Assigner (a member's, which plans only a few
// times in its life) sizes its buffers from the counts of members and
// partitions instead of growing them by appends from empty, which copied
// each of them log2(n) times: the first placement of 100 members on 20,000
// partitions, then 10 joining, allocate a few times per member (each
// over-quota member's list once), not once per doubling of every list.
func TestFirstPlansAllocs(t *testing.T) {
	const nm, np, joined = 100, 20_000, 10
	in := benchInput(nm+joined, np, nil)
	slices.SortFunc(in.Members, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	slices.SortFunc(in.Partitions, func(a, b Partition) int { return strings.Compare(a.ID, b.ID) })
	before := in.Members[:nm]
	none := make([]int32, np)
	for i := range none {
		none[i] = -1
	}
	var a Assigner
	placed, err := a.AssignSorted(before, in.Partitions, none, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The same owners as indices into the grown membership (members sorted
	// by id: the first nm are before's).
	owner := slices.Clone(placed)
	allocs := testing.AllocsPerRun(3, func() {
		var fresh Assigner
		target, err := fresh.AssignSorted(before, in.Partitions, none, nil)
		if err == nil {
			_, err = fresh.AssignSorted(in.Members, in.Partitions, owner, target)
		}
		if err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("%.0f allocations", allocs)
	if limit := 3.0 * (nm + joined); allocs > limit {
		t.Errorf("two first plans allocated %.0f times, want at most %.0f (3 per member)", allocs, limit)
	}
}
