package storetest

// The partition set, snapshots, independent groups, restores.

import (
	"fmt"
	"strings"

	"github.com/herdhq/herd/store"
)

// testSetPartitions: the set is replaced, sorted in the snapshot, weights
// kept; records of removed partitions stay until they return.
func testSetPartitions(e *env) {
	t := e.t
	set := []store.Partition{{ID: "c"}, {ID: "a", Weight: 2}, {ID: "b", Weight: 5}}
	if _, err := e.s.SetPartitions(e.ctx, e.group, store.PartitionSet{Partitions: set}); err != nil {
		t.Fatalf("SetPartitions: %v", err)
	}
	wantSet := func(want []store.Partition) {
		t.Helper()
		got := e.snap().Partitions
		ok := len(got) == len(want)
		for i := 0; ok && i < len(got); i++ {
			ok = got[i].ID == want[i].ID && weight(got[i].Weight) == weight(want[i].Weight)
		}
		if !ok {
			t.Fatalf("Snapshot.Partitions = %+v; want %+v (sorted by id, weights kept)", got, want)
		}
	}
	wantSet([]store.Partition{{ID: "a", Weight: 2}, {ID: "b", Weight: 5}, {ID: "c"}})

	a := e.open("member-a", longTTL)
	o := e.claim("a", a)
	e.checkpoint("a", o.Epoch, "cp-a")
	e.release("a", a, o.Epoch)

	e.setPartitions("d", "b")
	wantSet([]store.Partition{{ID: "b"}, {ID: "d"}})
	got := e.mustRecord("a")
	if got.Epoch != o.Epoch {
		t.Fatalf("record of removed partition %q is %s; want it kept with epoch %d", "a", fmtOwner(got), o.Epoch)
	}

	if !e.snap().PartitionSetStored {
		t.Fatalf("Snapshot.PartitionSetStored is false after SetPartitions; want true")
	}
	if _, err := e.s.SetPartitions(e.ctx, e.group, store.PartitionSet{}); err != nil {
		t.Fatalf("SetPartitions(empty): %v; want nil", err)
	}
	wantSet(nil)
	if !e.snap().PartitionSetStored {
		t.Fatalf("Snapshot.PartitionSetStored is false after SetPartitions(empty); want true: a reader must tell a set emptied on purpose from one never stored or lost")
	}

	e.setPartitions("a")
	wantSet([]store.Partition{{ID: "a"}})
	o2 := e.claim("a", a)
	if o2.Epoch <= o.Epoch || string(o2.Checkpoint) != "cp-a" {
		t.Fatalf("Claim of a partition that returned to the set gave %s; want an epoch above %d and checkpoint %q", fmtOwner(o2), o.Epoch, "cp-a")
	}
}

func weight(w int) int {
	if w == 0 {
		return 1
	}
	return w
}

// testSetPartitionsInvalid: a malformed set is rejected whole.
func testSetPartitionsInvalid(e *env) {
	t := e.t
	e.setPartitions("x", "y")
	bad := map[string][]store.Partition{
		"duplicate id":    {{ID: "a"}, {ID: "b"}, {ID: "a"}},
		"negative weight": {{ID: "a", Weight: -1}},
		"empty id":        {{ID: "a"}, {ID: ""}},
		"control char":    {{ID: "a\nb"}},
		"too long":        {{ID: strings.Repeat("p", store.MaxIDLength+1)}},
	}
	for what, set := range bad {
		_, err := e.s.SetPartitions(e.ctx, e.group, store.PartitionSet{Partitions: set})
		wantErr(t, err, store.ErrInvalid, "SetPartitions with a "+what, "ValidatePartitions rejects it")
		if got := partitionIDs(e.snap().Partitions); len(got) != 2 || got[0] != "x" || got[1] != "y" {
			t.Fatalf("a rejected SetPartitions (%s) changed the set to %q; want [x y] unchanged", what, got)
		}
	}
}

// testSnapshotEmpty: a group nobody used reads as empty, without error.
func testSnapshotEmpty(e *env) {
	s := e.snap()
	if len(s.Sessions)+len(s.Partitions)+len(s.Owners) != 0 || s.PartitionSetStored {
		e.t.Fatalf("Snapshot of an unused group = %+v; want it empty, with no partition set stored", s)
	}
}

// testSnapshotSorted: lists are sorted in byte order whatever the insertion
// order and the database's collation; sessions carry Remaining and Weight.
func testSnapshotSorted(e *env) {
	t := e.t
	// Ids whose byte order differs from most collations (case, accents,
	// digits, punctuation, spaces).
	ids := []string{"b", "B", "a", "A", "é", "e", "10", "9", " x", "_y", "Z", "ä", "a b", "a-b", "a.b", "日本"}
	var set []store.Partition
	for i, id := range ids {
		set = append(set, store.Partition{ID: id, Weight: i % 3})
	}
	if _, err := e.s.SetPartitions(e.ctx, e.group, store.PartitionSet{Partitions: set}); err != nil {
		t.Fatalf("SetPartitions: %v", err)
	}
	var sessions []string
	for i := range 6 {
		sessions = append(sessions, e.openIn(e.group, fmt.Sprintf("member-%d", i), i+1, longTTL))
	}
	// Claim in an order unrelated to the ids'.
	for i := len(ids) - 1; i >= 0; i -= 2 {
		e.claim(ids[i], sessions[i%len(sessions)])
	}
	for i := len(ids) - 2; i >= 0; i -= 2 {
		e.claim(ids[i], sessions[i%len(sessions)])
	}
	s := e.snap()
	checkSorted(t, s)
	if got, want := partitionIDs(s.Partitions), sortedCopy(ids); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Snapshot.Partitions ids = %q; want %q", got, want)
	}
	if len(s.Owners) != len(ids) {
		t.Fatalf("Snapshot has %d ownership records; want %d", len(s.Owners), len(ids))
	}
	for i, id := range ids {
		o, _ := findOwner(s, id)
		if o.Session != sessions[i%len(sessions)] {
			t.Fatalf("record of %q names session %q; want %q", id, o.Session, sessions[i%len(sessions)])
		}
		var p store.Partition
		for _, q := range s.Partitions {
			if q.ID == id {
				p = q
			}
		}
		if weight(p.Weight) != weight(i%3) {
			t.Fatalf("partition %q has weight %d; want %d", id, p.Weight, i%3)
		}
	}
	if len(s.Sessions) != len(sessions) {
		t.Fatalf("Snapshot lists %d sessions; want %d", len(s.Sessions), len(sessions))
	}
	for i, id := range sessions {
		si, ok := findSession(s, id)
		if !ok {
			t.Fatalf("Snapshot is missing session %q", id)
		}
		if si.Weight != i+1 || si.Member != fmt.Sprintf("member-%d", i) {
			t.Fatalf("session %q has Member %q Weight %d; want %q and %d", id, si.Member, si.Weight, fmt.Sprintf("member-%d", i), i+1)
		}
		if si.Remaining <= 0 || si.Remaining > longTTL {
			t.Fatalf("session %q has Remaining %v; want it in (0, %v]", id, si.Remaining, longTTL)
		}
	}
}

// testSnapshotSeesChanges: in a group of many records, every snapshot
// shows the changes made before it, one record at a time (catches backends
// that cache or patch snapshots and miss a change).
func testSnapshotSeesChanges(e *env) {
	t := e.t
	const n = 64
	a := e.open("member-a", longTTL)
	b := e.open("member-b", longTTL)
	owners := map[string]store.Ownership{}
	for i := range n {
		p := fmt.Sprintf("p%02d", (i*37)%n) // not in id order
		owners[p] = e.claim(p, a)
	}
	check := func(step string) {
		t.Helper()
		s := e.snap()
		checkSorted(t, s)
		if len(s.Owners) != len(owners) {
			t.Fatalf("%s: snapshot has %d records; want %d", step, len(s.Owners), len(owners))
		}
		for _, got := range s.Owners {
			if want := owners[got.Partition]; !sameOwner(got, want) {
				t.Fatalf("%s: record %s in the snapshot; want %s", step, fmtOwner(got), fmtOwner(want))
			}
		}
	}
	check("after claiming")
	check("reading again without a change")
	for i, p := range []string{"p00", "p31", "p63", "p07"} {
		o := owners[p]
		v := fmt.Sprintf("cp-%d", i)
		e.checkpoint(p, o.Epoch, v)
		o.Checkpoint = []byte(v)
		owners[p] = o
		check("after Checkpoint of " + p)
	}
	o := owners["p31"]
	e.release("p31", a, o.Epoch)
	o.Session, o.Member = "", ""
	owners["p31"] = o
	check("after Release of p31")
	owners["p31"] = e.claim("p31", b)
	check("after Claim of p31 by another session")
	owners["p64"] = e.claim("p64", b)
	owners["a-first"] = e.claim("a-first", b)
	check("after Claims of new partitions")
}

// testGroupsIndependent: groups share nothing: sessions, partition sets and
// records of one are invisible to and untouchable from another.
func testGroupsIndependent(e *env) {
	t := e.t
	g1, g2 := e.group, newGroup(t, "-second")
	s1 := e.openIn(g1, "m", 1, longTTL)
	s2 := e.openIn(g2, "m", 1, longTTL)
	if _, err := e.s.SetPartitions(e.ctx, g1, store.PartitionSet{Partitions: []store.Partition{{ID: "p"}, {ID: "only-in-1"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.SetPartitions(e.ctx, g2, store.PartitionSet{Partitions: []store.Partition{{ID: "p"}}}); err != nil {
		t.Fatal(err)
	}
	o1 := e.claimIn(g1, "p", s1)
	o2 := e.claimIn(g2, "p", s2) // the same partition id in another group is another record
	_ = o2

	_, err := store.Claim(e.ctx, e.s, g2, "q", s1)
	wantErr(t, err, store.ErrSessionExpired, "Claim in group 2 by a session of group 1", "a session lives in one group")
	err = e.s.Checkpoint(e.ctx, g2, "p", o1.Epoch, []byte("cross"))
	if o2.Epoch != o1.Epoch {
		wantErr(t, err, store.ErrNotOwner, "Checkpoint in group 2 with group 1's epoch", "records of groups are separate")
	}
	if err := e.s.CloseSession(e.ctx, g2, s1); err != nil {
		t.Fatalf("CloseSession in group 2 of a session of group 1: %v; want nil (unknown there)", err)
	}

	a, b := e.snapOf(g1), e.snapOf(g2)
	if !a.Alive(s1) || a.Alive(s2) || len(a.Sessions) != 1 {
		t.Fatalf("group 1 sessions = %+v; want only %q (CloseSession in another group must not end it)", a.Sessions, s1)
	}
	if !b.Alive(s2) || b.Alive(s1) || len(b.Sessions) != 1 {
		t.Fatalf("group 2 sessions = %+v; want only %q", b.Sessions, s2)
	}
	if got := partitionIDs(b.Partitions); len(got) != 1 || got[0] != "p" {
		t.Fatalf("group 2 partitions = %q; want [p]", got)
	}
	if ob, _ := findOwner(b, "p"); ob.Session != s2 || len(b.Owners) != 1 {
		t.Fatalf("group 2 records = %+v; want one record of p owned by %q", b.Owners, s2)
	}
	if oa, _ := findOwner(a, "p"); oa.Session != s1 {
		t.Fatalf("group 1 record of p = %s; want it owned by %q", fmtOwner(oa), s1)
	}
}

// testRestore: Restore re-creates a missing record, released, with the given
// epoch and checkpoint; over an existing record it writes only if the record
// is released and its epoch is lower (a stale restore after a data loss,
// beaten by the newer owner's); it never touches an owned record or one with
// an epoch as high; the next Claim gets a larger epoch and the restored
// checkpoint.
func testRestore(e *env) {
	t := e.t
	const old = uint64(1_000_000)
	if err := e.s.Restore(e.ctx, e.group, "lost", old, []byte("cp-kept-by-member")); err != nil {
		t.Fatalf("Restore of a partition with no record: %v; want success", err)
	}
	got := e.mustRecord("lost")
	if got.Session != "" || got.Epoch != old {
		t.Fatalf("restored record is %s; want released, epoch %d", fmtOwner(got), old)
	}
	from := e.snap() // the log of the restores below must replay onto it
	for _, ep := range []uint64{old, old - 5} {
		err := e.s.Restore(e.ctx, e.group, "lost", ep, []byte("older"))
		wantErr(t, err, store.ErrNotOwner, fmt.Sprintf("a Restore at epoch %d over a released record at epoch %d", ep, old), "Restore must never overwrite a record with an epoch as high")
		if got := e.mustRecord("lost"); got.Session != "" || got.Epoch != old {
			t.Fatalf("record after a refused Restore is %s; want it unchanged (released, epoch %d)", fmtOwner(got), old)
		}
	}
	if err := e.s.Restore(e.ctx, e.group, "lost", old+5, []byte("successor")); err != nil {
		t.Fatalf("Restore at epoch %d over a released record at epoch %d: %v; want success (the newer owner's progress wins)", old+5, old, err)
	}
	got = e.mustRecord("lost")
	if got.Session != "" || got.Epoch != old+5 {
		t.Fatalf("record after a Restore with a higher epoch is %s; want released, epoch %d", fmtOwner(got), old+5)
	}
	to := e.snap()
	replay(t, from, to, e.readLog(from.Version, to.Version), "a Restore over a released record with a lower epoch")

	a := e.open("member-a", longTTL)
	o := e.claim("lost", a)
	if o.Epoch <= old+5 || string(o.Checkpoint) != "successor" {
		t.Fatalf("Claim after Restore returned %s; want epoch > %d and the restored checkpoint", fmtOwner(o), old+5)
	}
	e.checkpoint("lost", o.Epoch, "newer")
	err := e.s.Restore(e.ctx, e.group, "lost", o.Epoch+1, []byte("stale"))
	wantErr(t, err, store.ErrNotOwner, "Restore of an owned partition", "Restore must never overwrite an owner's progress")
	e.wantCheckpoint("lost", a, "newer", "after a Restore of an owned partition")

	// A refused Restore writes no checkpoint either.
	if err := e.s.Restore(e.ctx, e.group, "lost2", old, []byte("kept")); err != nil {
		t.Fatalf("Restore of a partition with no record: %v; want success", err)
	}
	err = e.s.Restore(e.ctx, e.group, "lost2", old-5, []byte("older"))
	wantErr(t, err, store.ErrNotOwner, "a Restore at a lower epoch", "Restore must never overwrite a record with a higher epoch")
	e.wantCheckpoint("lost2", a, "kept", "after a refused Restore")
}
