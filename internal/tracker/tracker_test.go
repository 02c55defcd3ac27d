package tracker

import (
	"context"
	"testing"
	"time"
)

// The counters behind WaitBalanced agree with a walk of the partitions
// through overlaps, stops, moves and a partition outside the set.
func TestTrackerCounts(t *testing.T) {
	tr := New()
	parts := []string{"0", "1", "2", "3"}
	for i, p := range parts {
		tr.started([]string{"a", "b"}[i%2], p)
	}
	if ok, why := tr.Balanced(parts, []string{"a", "b"}); !ok {
		t.Fatalf("2+2 on a, b: not balanced: %s", why)
	}
	if ok, _ := tr.Balanced(parts, []string{"a", "b", "c"}); ok {
		t.Fatal("c runs nothing: balanced")
	}
	tr.started("c", "0") // overlap: a and c run 0
	if ok, _ := tr.Balanced(parts, []string{"a", "b", "c"}); ok || tr.MaxConcurrent() != 2 || tr.Runners("0", "a") != 1 || tr.Runners("0", "") != 2 {
		t.Fatalf("overlap: max %d, runners %d/%d", tr.MaxConcurrent(), tr.Runners("0", "a"), tr.Runners("0", ""))
	}
	if o := tr.OwnersExcept("a"); o["0"] != "c" || o["1"] != "b" || o["2"] != "" || len(o) != 3 {
		t.Fatalf("OwnersExcept(a) = %v", o)
	}
	if o := tr.Owners(); len(o) != 3 || o["0"] != "" {
		t.Fatalf("Owners() = %v; want 3 partitions, not 0", o)
	}
	tr.stopped("a", "0")
	tr.stopped("b", "3")
	tr.started("c", "3")
	if tr.Moves() != 2 {
		t.Fatalf("moves %d, want 2", tr.Moves())
	}
	// a: 2, b: 1, c: 0 and 3.
	if ok, _ := tr.Balanced(parts, []string{"a", "b"}); ok {
		t.Fatal("c, not a member, runs 2 partitions: balanced")
	}
	if ok, why := tr.Balanced(parts, []string{"a", "b", "c"}); !ok {
		t.Fatalf("a: 2, b: 1, c: 0 3: %s", why)
	}
	tr.stopped("a", "2")
	tr.started("b", "2")
	if ok, why := tr.Balanced(parts, []string{"b", "c"}); !ok {
		t.Fatalf("b: 1 2, c: 0 3: %s", why)
	}
	// A partition outside the set running in place of one of the set.
	tr.stopped("c", "3")
	tr.started("c", "x")
	if ok, _ := tr.Balanced(parts, []string{"b", "c"}); ok {
		t.Fatal("3 runs nowhere, x outside the set runs: balanced")
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	go func() {
		tr.stopped("c", "x")
		tr.started("c", "3")
	}()
	if err := tr.WaitBalanced(ctx, parts, []string{"b", "c"}); err != nil {
		t.Fatal(err)
	}
}
