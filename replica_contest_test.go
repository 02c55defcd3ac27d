package herd

import (
	"context"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
)

// TestContestExplainedNoFullPlan: a claim that lost a race (contested) and
// whose explaining entry, another member's claim of the partition, comes
// in the very call to the log that reads it to its end, leaves the target
// on: the contest is explained, and nothing calls for a full plan.
func TestContestExplainedNoFullPlan(t *testing.T) {
	sessions := []store.SessionInfo{{ID: "A"}, {ID: "B"}}
	parts := []store.Partition{{ID: "p1"}, {ID: "p2"}}
	v := func(n uint64) store.Version { return store.Version{Seq: n, Tag: 1} }
	snap := &store.Snapshot{Version: v(1), Sessions: sessions, Partitions: parts, Owners: []store.Ownership{
		{Partition: "p1", Epoch: 1}, {Partition: "p2", Epoch: 1},
	}}
	m := &Member{runCtx: context.Background()}
	r := &m.rep
	r.work, r.fresh = snap, true
	a := newPlanTarget(nil, "A", sessions, parts, []int32{0, 1}, nil, time.Minute)
	r.setTarget(a, snap.Version)
	contested := time.Now()
	r.contest("p2", contested) // A's target is B's: B claimed it first
	f := &feed{m: m, r: r}
	c := &logCall{after: v(1), began: contested.Add(time.Millisecond), atEnd: true,
		cs: []store.Change{{Version: v(2), Kind: store.Claimed, Partition: "p2", Session: "B", Epoch: 2}}}
	f.take(c)
	if r.target == nil {
		t.Fatal("a contest explained by the answer that read the log to its end dropped the target: a full plan for nothing")
	}
	if _, ok, _ := r.contestedSince("p2"); ok {
		t.Fatal("p2 still contested after the entry about it")
	}
	if _, _, ok := r.onTarget("A", time.Now()); !ok {
		t.Fatal("plan not on target after a claim by the target owner")
	}
	// A contest the answer does not explain still makes the next plan a
	// full one.
	r.contest("p1", contested.Add(2*time.Millisecond))
	c = &logCall{after: v(2), began: contested.Add(3 * time.Millisecond), atEnd: true}
	if !f.take(c) || r.target != nil {
		t.Fatal("a contest left unexplained by a read to the log's end kept the target")
	}
}
