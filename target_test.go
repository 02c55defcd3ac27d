package herd

import (
	"slices"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
)

// TestAimProgress checks which entries count as carrying out a plan's
// target (and so cost no plan) and which make the next plan a full one.
func TestAimProgress(t *testing.T) {
	sessions := []store.SessionInfo{{ID: "A"}, {ID: "B"}, {ID: "C"}}
	parts := []store.Partition{{ID: "p1"}, {ID: "p2"}, {ID: "p3"}}
	// p1 -> A (this member), p2 -> B, p3 -> C
	a := newPlanTarget(nil, "A", sessions, parts, []int32{0, 1, 2}, nil, time.Minute)
	const toClaim = "release of this member's target (to claim)"
	cases := []struct {
		name string
		c    store.Change
		want bool
	}{
		{"claim by the target owner", store.Change{Kind: store.Claimed, Partition: "p2", Session: "B"}, true},
		{"own claim of its target", store.Change{Kind: store.Claimed, Partition: "p1", Session: "A"}, true},
		{"claim by another than the target", store.Change{Kind: store.Claimed, Partition: "p2", Session: "C"}, false},
		{"claim by this member of another's target", store.Change{Kind: store.Claimed, Partition: "p3", Session: "A"}, false},
		{"release toward another member", store.Change{Kind: store.Released, Partition: "p2", Session: "C"}, true},
		{"own release toward another member", store.Change{Kind: store.Released, Partition: "p3", Session: "A"}, true},
		{"release of this member's target (to claim)", store.Change{Kind: store.Released, Partition: "p1", Session: "B"}, true},
		{"release by the target owner", store.Change{Kind: store.Released, Partition: "p2", Session: "B"}, false},
		{"give-back", store.Change{Kind: store.Released, Partition: "p2", Session: "C", GivenBack: "C"}, false},
		{"partition outside the set", store.Change{Kind: store.Claimed, Partition: "p9", Session: "A"}, false},
		{"session opened", store.Change{Kind: store.SessionOpened, Session: "D"}, false},
		{"session expired", store.Change{Kind: store.SessionExpired, Session: "B"}, false},
		{"session closed", store.Change{Kind: store.SessionClosed, Session: "B"}, false},
		{"restore", store.Change{Kind: store.Restored, Partition: "p2", Epoch: 9}, false},
		{"partition set", store.Change{Kind: store.PartitionsSet}, false},
	}
	// The same answers with the records' hint (aim.recPart): records of a
	// copy with a stray record "p0" before the set, and every hint an
	// entry may come with, right, wrong or out of range.
	owners := []store.Ownership{{Partition: "p0", Epoch: 1}, {Partition: "p1"}, {Partition: "p2", Epoch: 3}, {Partition: "p3"}}
	hinted := *a
	hinted.recPart = []int32{-1, 0, 1, 2}
	snap := &store.Snapshot{Owners: owners}
	for _, tc := range cases {
		if got, claim := a.progress(tc.c); got != tc.want || claim != (tc.name == toClaim) {
			t.Errorf("%s: progress = %v, %v; want %v, %v", tc.name, got, claim, tc.want, tc.name == toClaim)
		}
		if got, _ := hinted.progressIn(tc.c, snap); got != tc.want {
			t.Errorf("%s: progressIn = %v, want %v", tc.name, got, tc.want)
		}
		for rec := -1; rec <= len(owners); rec++ {
			if got, _ := hinted.progressAt(tc.c, rec); got != tc.want {
				t.Errorf("%s: progressAt(record %d) = %v, want %v", tc.name, rec, got, tc.want)
			}
		}
	}
	// A hint into records that moved since the plan (a record inserted
	// before them) is checked against the partition's id, not trusted.
	moved := *a
	moved.recPart = []int32{0, 1, 2} // the plan saw no stray
	for _, tc := range cases {
		if got, _ := moved.progressIn(tc.c, snap); got != tc.want {
			t.Errorf("%s: progressIn over moved records = %v, want %v", tc.name, got, tc.want)
		}
	}
	// A partition the balance left without a target is never progress.
	b := newPlanTarget(nil, "A", sessions, parts, []int32{0, -1, 7}, nil, time.Minute)
	for _, p := range []string{"p2", "p3"} {
		if ok, _ := b.progress(store.Change{Kind: store.Claimed, Partition: p, Session: "B"}); ok {
			t.Errorf("claim of %s, which has no valid target: progress", p)
		}
	}
	// A new aim made over b's lists answers as a fresh one, with b's
	// memory, and copies what it is given.
	target, hint := []int32{0, 1, 2}, []int32{-1, 0, 1, 2}
	oldTarget := &b.target[0]
	c := newPlanTarget(b, "A", sessions, parts, target, hint, time.Minute)
	target[0], hint[1] = 2, -1
	if c != b || &c.target[0] != oldTarget || c.due != (time.Time{}) {
		t.Error("newAim over a previous aim did not reuse it")
	}
	for _, tc := range cases {
		if got, _ := c.progressIn(tc.c, snap); got != tc.want {
			t.Errorf("%s: progressIn of a reused aim = %v, want %v", tc.name, got, tc.want)
		}
	}
	if d := newPlanTarget(c, "A", sessions, parts, []int32{0, 1, 2}, nil, time.Minute); d.recPart != nil {
		t.Error("reused aim kept a hint it was not given")
	}
}

// TestReplicaAim checks the replica's bookkeeping: entries that arrived
// before the aim was set are checked against it, an entry off the aim or
// the aim's expiry makes the next plan full, and a new read drops it.
func TestReplicaAim(t *testing.T) {
	sessions := []store.SessionInfo{{ID: "A"}, {ID: "B"}}
	parts := []store.Partition{{ID: "p1"}, {ID: "p2"}}
	now := time.Now()
	a := newPlanTarget(nil, "A", sessions, parts, []int32{0, 1}, nil, time.Second)
	v := store.Version{Seq: 5, Tag: 1}
	r := &replica{work: &store.Snapshot{Version: v}}

	// No entry since the plan: the aim lasts (a plan would find the same).
	r.setTarget(a, v)
	if next, _, ok := r.onTarget("A", now.Add(time.Hour)); !ok || next != time.Second {
		t.Fatalf("aim no entry reached: onAim = %v, %v; want on aim, look again in 1s", next, ok)
	}
	// A plan's own due time (a contested claim's) ends it.
	a.due = now.Add(time.Minute)
	if _, _, ok := r.onTarget("A", now.Add(time.Minute)); ok {
		t.Fatal("plan skipped at the aim's due time")
	}
	a.due = time.Time{}

	r.pending, r.npending = [][]store.Change{{{Version: store.Version{Seq: 6, Tag: 1}, Kind: store.Claimed, Partition: "p2", Session: "B"}}}, 1
	r.setTarget(a, v)
	if _, _, ok := r.onTarget("A", now); !ok {
		t.Fatal("progress queued before the aim was set: plan not skipped")
	}
	if _, _, ok := r.onTarget("B", now); ok {
		t.Fatal("another session's plan skipped on this aim")
	}
	if _, _, ok := r.onTarget("A", time.Now().Add(time.Second)); ok {
		t.Fatal("plan skipped a life after the first entry the aim let pass")
	}
	// An entry that arrives after the aim was set starts its life.
	r.pending, r.npending = nil, 0
	r.setTarget(a, v)
	r.checkTarget([]store.Change{{Kind: store.Claimed, Partition: "p1", Session: "A"}})
	if _, _, ok := r.onTarget("A", time.Now().Add(2*time.Second)); ok {
		t.Fatal("plan skipped a life after an entry checked by the feed")
	}
	// Entries that stop coming end it sooner: a third of its life after
	// the last one.
	r.setTarget(a, v)
	r.checkTarget([]store.Change{{Kind: store.Claimed, Partition: "p1", Session: "A"}})
	if next, _, ok := r.onTarget("A", time.Now()); !ok || next > a.life/3 {
		t.Fatalf("entry let pass: onAim = %v, %v; want on aim, look again within %v", next, ok, a.life/3)
	}
	if _, _, ok := r.onTarget("A", time.Now().Add(a.life/2)); ok {
		t.Fatal("plan skipped after the log went quiet")
	}
	r.checkTarget([]store.Change{{Kind: store.SessionOpened, Session: "C"}})
	if _, _, ok := r.onTarget("A", now); ok {
		t.Fatal("plan skipped after a session opened")
	}

	// An aim set on a copy the feed has moved past cannot be checked,
	// unless the entries it applied meanwhile were kept (noteUnchecked).
	r.pending, r.npending = nil, 0
	r.work.Version = store.Version{Seq: 7, Tag: 1}
	r.setTarget(a, v)
	if _, _, ok := r.onTarget("A", now); ok {
		t.Fatal("plan skipped although entries after the plan were applied unchecked")
	}
	applied := []store.Change{
		{Version: store.Version{Seq: 5, Tag: 1}, Kind: store.Claimed, Partition: "p1", Session: "B"}, // in the plan's copy
		{Version: store.Version{Seq: 6, Tag: 1}, Kind: store.Claimed, Partition: "p2", Session: "B"},
		{Version: store.Version{Seq: 7, Tag: 1}, Kind: store.Released, Partition: "p1", Session: "B"},
	}
	r.noteUnchecked(applied)
	r.setTarget(a, v)
	if _, claims, ok := r.onTarget("A", now); !ok || !slices.Equal(claims, []string{"p1"}) {
		t.Fatalf("progress applied during the plan: onAim = %v, claims %v; want on aim, claim [p1]", ok, claims)
	}
	if _, claims, _ := r.onTarget("A", now); len(claims) != 0 {
		t.Fatalf("claims %v given twice", claims)
	}
	r.noteUnchecked(applied[2:]) // 6 missing: a gap
	r.setTarget(a, v)
	if _, _, ok := r.onTarget("A", now); ok {
		t.Fatal("plan skipped although an entry applied during the plan was not kept")
	}
	r.noteUnchecked(applied[:2])
	r.noteUnchecked([]store.Change{{Version: store.Version{Seq: 7, Tag: 1}, Kind: store.Claimed, Partition: "p1", Session: "B"}})
	r.setTarget(a, v)
	if _, _, ok := r.onTarget("A", now); ok {
		t.Fatal("plan skipped although another member claimed this member's target during the plan")
	}

	// A contested claim leaves the aim on (plan bounds it by the claim's
	// wait), until the log read to its end leaves it unexplained.
	r.setTarget(a, r.work.Version)
	r.contest("p1", now)
	if _, _, ok := r.onTarget("A", now); !ok {
		t.Fatal("a contested claim alone made the plan a full one")
	}
}

// TestApplyChecksAim: entries checked against the aim as they are applied
// (applyPending with checkLast) leave the aim as checkAim before applying
// them does.
func TestApplyChecksAim(t *testing.T) {
	sessions := []store.SessionInfo{{ID: "A"}, {ID: "B"}, {ID: "C"}}
	parts := []store.Partition{{ID: "p1"}, {ID: "p2"}, {ID: "p3"}}
	v := func(n uint64) store.Version { return store.Version{Seq: n, Tag: 1} }
	progress := []store.Change{ // p2 handed from C to its target B
		{Kind: store.Released, Partition: "p2", Session: "C", Epoch: 3, Version: v(2)},
		{Kind: store.Claimed, Partition: "p2", Session: "B", Member: "b", Epoch: 4, Version: v(3)},
	}
	off := []store.Change{ // p3, C's target, claimed by A
		{Kind: store.Claimed, Partition: "p3", Session: "A", Member: "a", Epoch: 2, Version: v(2)},
	}
	for _, tc := range []struct {
		name string
		cs   []store.Change
		off  bool
	}{{"progress", progress, false}, {"off the aim", off, true}} {
		for _, fused := range []bool{false, true} {
			snap := &store.Snapshot{Version: v(1), Sessions: sessions, Partitions: parts, Owners: []store.Ownership{
				{Partition: "p1", Epoch: 1}, {Partition: "p2", Session: "C", Member: "c", Epoch: 3}, {Partition: "p3", Epoch: 1},
			}}
			r := &replica{work: snap}
			r.target = newPlanTarget(nil, "A", sessions, parts, []int32{0, 1, 2}, []int32{0, 1, 2}, time.Minute)
			r.pending, r.npending = [][]store.Change{tc.cs}, len(tc.cs)
			if !fused {
				r.checkTarget(tc.cs)
			}
			if !r.applyPending(fused) {
				t.Fatalf("%s (fused %v): the entries did not apply", tc.name, fused)
			}
			if r.offTarget != tc.off || r.targetFirst.IsZero() != tc.off {
				t.Errorf("%s (fused %v): offAim %v, aim reached %v; want offAim %v", tc.name, fused, r.offTarget, !r.targetFirst.IsZero(), tc.off)
			}
			if r.work.Version != tc.cs[len(tc.cs)-1].Version {
				t.Errorf("%s (fused %v): copy at %v after the entries", tc.name, fused, r.work.Version)
			}
		}
	}
}

// TestPlanOnAimClaims: on its aim, plan claims what was released toward the
// member, and only that; a partition it runs already is left out, and a
// hold after a loss of the store's data makes the plan a full one.
func TestPlanOnAimClaims(t *testing.T) {
	sessions := []store.SessionInfo{{ID: "A"}, {ID: "B"}}
	parts := []store.Partition{{ID: "p1"}, {ID: "p2"}}
	v := store.Version{Seq: 5, Tag: 1}
	m := &Member{}
	m.rep.work = &store.Snapshot{Version: v}
	m.rep.setTarget(newPlanTarget(nil, "A", sessions, parts, []int32{0, 1}, nil, time.Minute), v)
	released := func(p string) {
		m.rep.mu.Lock()
		defer m.rep.mu.Unlock()
		m.rep.checkTarget([]store.Change{{Kind: store.Released, Partition: p, Session: "B"}})
	}
	sess := &session{id: "A"}

	released("p1")
	pl, ok := m.planOnTarget(sess, map[string]*slot{})
	if !ok || !pl.onTarget || pl.wait || !slices.Equal(pl.claim, []string{"p1"}) {
		t.Fatalf("release toward the member: planOnAim = %+v, %v; want a claim of p1 on the aim", pl, ok)
	}
	if pl, ok := m.planOnTarget(sess, map[string]*slot{}); !ok || !pl.wait || len(pl.claim) != 0 {
		t.Fatalf("nothing new: planOnAim = %+v, %v; want nothing to do", pl, ok)
	}

	released("p1")
	if pl, ok := m.planOnTarget(sess, map[string]*slot{"p1": {}}); !ok || !pl.wait || len(pl.claim) != 0 {
		t.Fatalf("release of a partition the member runs: planOnAim = %+v, %v; want nothing to do", pl, ok)
	}

	released("p1")
	m.loss.holdFree = time.Now().Add(time.Minute)
	if _, ok := m.planOnTarget(sess, map[string]*slot{}); ok {
		t.Fatal("claim on the aim during a hold after a loss; want a full plan")
	}
}

// TestReplicaTrustsHintOfSameLayout: the replica trusts a target's hint
// into the records (recPart) without checking the partition's id only
// while the copy has its records where the plan's copy had them (the same
// read, as many records); a record inserted before them, or a new read
// of as many records, makes it check again, and an entry off the target
// is still found off.
func TestReplicaTrustsHintOfSameLayout(t *testing.T) {
	sessions := []store.SessionInfo{{ID: "A"}, {ID: "B"}, {ID: "C"}}
	parts := []store.Partition{{ID: "p1"}, {ID: "p2"}, {ID: "p3"}}
	owners := []store.Ownership{{Partition: "p1"}, {Partition: "p2"}, {Partition: "p3"}}
	v := store.Version{Seq: 5, Tag: 1}
	// p1 -> A (this member), p2 -> B, p3 -> C
	a := newPlanTarget(nil, "A", sessions, parts, []int32{0, 1, 2}, []int32{0, 1, 2}, time.Minute)
	a.layout = 1
	r := &replica{work: &store.Snapshot{Version: v, Partitions: parts, Owners: slices.Clone(owners)}, layout: 1}
	offP1 := store.Change{Kind: store.Claimed, Partition: "p1", Session: "B", Epoch: 1}
	check := func(what string, wantExact bool) {
		t.Helper()
		if got := r.hintExact(a); got != wantExact {
			t.Fatalf("%s: hintExact = %v, want %v", what, got, wantExact)
		}
		r.setTarget(a, r.work.Version)
		r.checkTarget([]store.Change{{Kind: store.Claimed, Partition: "p3", Session: "C", Epoch: 1}})
		if r.offTarget {
			t.Fatalf("%s: the claim of p3 by its target owner taken off the target", what)
		}
		r.checkTarget([]store.Change{offP1})
		if !r.offTarget {
			t.Fatalf("%s: a claim of p1 by B (its target is A) taken for progress", what)
		}
	}
	check("the plan's copy", true)

	// A record inserted before the others: p1 is now at the place p2 had.
	if err := r.work.ApplyAll([]store.Change{{Version: store.Version{Seq: 6, Tag: 1}, Kind: store.Claimed, Partition: "p0", Session: "B", Epoch: 1}}); err != nil {
		t.Fatal(err)
	}
	check("a record inserted", false)

	// A new read, with as many records as the plan's copy, in other places.
	r.work = &store.Snapshot{Version: v, Partitions: parts, Owners: []store.Ownership{{Partition: "p0"}, {Partition: "p1"}, {Partition: "p3"}}}
	r.layout++
	check("a new read", false)
}

// progress is progressHint without a hint.
func (a *planTarget) progress(c store.Change) (ok, claim bool) { return a.progressHint(c, -1, false) }

// progressAt is progressHint with a hint that is checked.
func (a *planTarget) progressAt(c store.Change, rec int) (ok, claim bool) {
	return a.progressHint(c, rec, false)
}

// progressIn is the replica's progressIn on the copy snap, the hint checked.
func (a *planTarget) progressIn(c store.Change, snap *store.Snapshot) (ok, claim bool) {
	r := &replica{work: snap}
	return r.progressIn(a, c, false)
}

// onTarget is onTargetRunning for a member that runs nothing: a target
// whose life ends, ends.
func (r *replica) onTarget(sess string, now time.Time) (next time.Duration, claims []string, ok bool) {
	return r.onTargetRunning(&session{id: sess}, nil, now, 0)
}
