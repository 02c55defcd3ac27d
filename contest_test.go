package herd

import (
	"testing"
	"time"

	"github.com/herdhq/herd/store"
)

// TestContestClaims checks which failed claims are contested: not those
// the copy explains already (an entry about the partition queued, or the
// partition held by a live session), the others.
func TestContestClaims(t *testing.T) {
	r := &replica{work: &store.Snapshot{
		Version:  store.Version{Seq: 5, Tag: 1},
		Sessions: []store.SessionInfo{{ID: "A"}, {ID: "B"}},
		Owners: []store.Ownership{
			{Partition: "p1", Session: "B", Epoch: 3}, // held by a live session
			{Partition: "p2"},                         // free
			{Partition: "p3"},                         // free, but an entry about it is queued
			{Partition: "p4", Session: "X", Epoch: 2}, // held by a session the copy does not show
		},
	}}
	r.pending, r.npending = [][]store.Change{{{Version: store.Version{Seq: 6, Tag: 1}, Kind: store.Claimed, Partition: "p3", Session: "B", Epoch: 4}}}, 1
	now := time.Now()
	r.contestClaims([]string{"p1", "p2", "p3", "p4", "p5"}, now)
	for p, want := range map[string]bool{"p1": false, "p2": true, "p3": false, "p4": true, "p5": true} {
		if _, got, _ := r.contestedSince(p); got != want {
			t.Errorf("%s contested = %v, want %v", p, got, want)
		}
	}
	if !r.lastContest.Equal(now) {
		t.Errorf("lastContest = %v, want %v", r.lastContest, now)
	}
	// A give-back marks its partition contested although the copy shows
	// it held (by this member).
	r.contest("p1", now)
	if _, ok, _ := r.contestedSince("p1"); !ok {
		t.Error("contest did not mark p1")
	}
}

// TestReachedSince: the copy counts as having read the log to its end
// since t only after a call that began at t or later did.
func TestReachedSince(t *testing.T) {
	var r replica
	t0 := time.Now()
	if reachedSince(&r, t0) {
		t.Fatal("reachedSince with no call yet")
	}
	r.reached = t0.Add(-time.Millisecond)
	if reachedSince(&r, t0) {
		t.Fatal("a call that began before t0 counts")
	}
	r.reached = t0
	if !reachedSince(&r, t0) {
		t.Fatal("a call that began at t0 does not count")
	}
}

// reachedSince is contestedSince's answer reached for a claim contested at t.
func reachedSince(r *replica, t time.Time) bool {
	r.contest("p", t)
	_, _, reached := r.contestedSince("p")
	return reached
}
