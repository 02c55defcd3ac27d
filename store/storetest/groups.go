package storetest

import (
	"slices"

	"github.com/herdhq/herd/store"
)

// testGroups checks store.GroupLister, for a backend that implements it
// (the subtest is skipped otherwise): a group is listed once it holds a
// session, a partition set alone, or records alone, with ids of every kind
// the suite's unusual ids cover, and is no longer listed after DeleteGroup.
// Other subtests write groups of their own meanwhile, so it checks only its
// own groups.
func testGroups(e *env) {
	t := e.t
	gl, ok := e.s.(store.GroupLister)
	if !ok {
		t.Skip("the store does not implement store.GroupLister (optional; every backend should)")
	}
	list := func() []string {
		t.Helper()
		gs, err := gl.Groups(e.ctx)
		if err != nil {
			t.Fatalf("Groups: %v; want the store's groups", err)
		}
		if !slices.IsSorted(gs) || len(slices.Compact(slices.Clone(gs))) != len(gs) {
			t.Fatalf("Groups returned %q; want them sorted, each once", gs)
		}
		return gs
	}
	withSession := e.group
	withSet := newGroup(t, "-set")
	withRecord := newGroup(t, "-record")
	var unusual []string
	for _, id := range []string{"{tag}", "a*b?c[d]", "a:b:c", "ünïcödé", "}:sessions"} {
		unusual = append(unusual, groupWith(e.group, id))
	}
	never := newGroup(t, "-never")
	e.open("m", longTTL)
	if _, err := e.s.SetPartitions(e.ctx, withSet, store.PartitionSet{}); err != nil {
		t.Fatalf("SetPartitions(%q, none): %v", withSet, err)
	}
	if err := e.s.Restore(e.ctx, withRecord, "p", 5, []byte("x")); err != nil {
		t.Fatalf("Restore in %q: %v", withRecord, err)
	}
	for _, g := range unusual {
		e.openIn(g, "m", 1, longTTL)
	}
	// Reading a group does not make it one.
	e.snapOf(never)
	if _, err := e.s.Records(e.ctx, never, []string{"p"}); err != nil {
		t.Fatalf("Records in %q: %v", never, err)
	}
	gs := list()
	for _, g := range append([]string{withSession, withSet, withRecord}, unusual...) {
		if !slices.Contains(gs, g) {
			t.Fatalf("Groups does not list %s, which holds data; got %d groups", quote(g), len(gs))
		}
	}
	if slices.Contains(gs, never) {
		t.Fatalf("Groups lists %s, which was only read; want only groups that hold something", quote(never))
	}
	if err := e.s.DeleteGroup(e.ctx, withRecord, false); err != nil {
		t.Fatalf("DeleteGroup(%q): %v", withRecord, err)
	}
	if slices.Contains(list(), withRecord) {
		t.Fatalf("Groups lists %s after DeleteGroup; want it gone", quote(withRecord))
	}
}
