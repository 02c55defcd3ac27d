package storetest

import (
	"bytes"
	"fmt"
	"strings"
	"time"

	"github.com/herdhq/herd/store"
)

// Records (store.Store.Records): the records asked for, in the order asked,
// with their checkpoints; the times on the store's clock, checked against
// the local clock within ageSlack; bad batches refused with ErrInvalid.

// ageSlack is how far a record's age may be from what the local clock
// measured around the calls: the two clocks' rates differ a little, and a
// store's time has its own resolution.
const ageSlack = 100 * time.Millisecond

// ageWait is the age the tests wait for before they check that a time was
// reset: far above ageSlack, so "reset" cannot be confused with "old".
const ageWait = 300 * time.Millisecond

// records calls Records and fails the test on error.
func (e *env) records(partitions ...string) []store.Record {
	e.t.Helper()
	rs, err := e.s.Records(e.ctx, e.group, partitions)
	if err != nil {
		e.t.Fatalf("Records(%q): %v; want the records", partitions, err)
	}
	return rs
}

// oneRecord is Records of one partition, failing the test unless it has a
// record.
func (e *env) oneRecord(partition string) store.Record {
	e.t.Helper()
	rs := e.records(partition)
	if len(rs) != 1 || rs[0].Partition != partition {
		e.t.Fatalf("Records(%q) returned %s; want that partition's record", partition, fmtRecords(rs))
	}
	return rs[0]
}

func fmtRecords(rs []store.Record) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = fmt.Sprintf("%s since %v, checkpoint age %v", fmtOwner(r.Ownership), r.Since, r.CheckpointAge)
	}
	return "[" + strings.Join(parts, "; ") + "]"
}

// wantAge fails the test unless age (what the store reported) is at most
// the local time elapsed since before (a moment before the write it
// dates) plus ageSlack.
func (e *env) wantAge(what string, age time.Duration, before time.Time) {
	e.t.Helper()
	if elapsed := time.Since(before); age < 0 || age > elapsed+ageSlack {
		e.t.Fatalf("%s is %v; want between 0 and %v (the local time since just before the write, %v, plus %v)",
			what, age, elapsed+ageSlack, elapsed, ageSlack)
	}
}

// testRecords: Records returns the records asked for in the order asked,
// leaves out the partitions that have none, carries checkpoints (nil where
// none was written) and the fields a snapshot shows, and changes nothing.
func testRecords(e *env) {
	t := e.t
	start := time.Now()
	a := e.open("member-a", longTTL)
	b := e.open("member-b", longTTL)
	pa := e.claim("pa", a)
	e.checkpoint("pa", pa.Epoch, "at-a")
	e.claim("pb", b)
	rel := e.claim("released", a)
	e.checkpoint("released", rel.Epoch, "kept")
	e.release("released", a, rel.Epoch)
	if err := e.s.Restore(e.ctx, e.group, "restored", 1_000_000, []byte("restored-cp")); err != nil {
		t.Fatalf("Restore of a partition with no record: %v; want success", err)
	}
	snap := e.snap()

	ask := []string{"restored", "missing", "pb", "pa", "released", "also missing"}
	rs := e.records(ask...)
	want := []struct {
		partition, checkpoint string
		hasCheckpoint         bool
	}{
		{"restored", "restored-cp", true},
		{"pb", "", false},
		{"pa", "at-a", true},
		{"released", "kept", true},
	}
	if len(rs) != len(want) {
		t.Fatalf("Records(%q) returned %s; want the records of %d partitions in the order asked, without the missing ones", ask, fmtRecords(rs), len(want))
	}
	for i, w := range want {
		r := rs[i]
		if r.Partition != w.partition {
			t.Fatalf("Records(%q) result %d is partition %q; want %q (the order asked, missing ones left out): %s", ask, i, r.Partition, w.partition, fmtRecords(rs))
		}
		o, ok := findOwner(snap, w.partition)
		if !ok || !sameOwner(r.Ownership, o) {
			t.Fatalf("Records: %s; want the record the snapshot shows, %s", fmtOwner(r.Ownership), fmtOwner(o))
		}
		switch {
		case !w.hasCheckpoint && r.Checkpoint != nil:
			t.Fatalf("Records: %s has a checkpoint; want nil (none was ever written)", fmtOwner(r.Ownership))
		case w.hasCheckpoint && !bytes.Equal(r.Checkpoint, []byte(w.checkpoint)):
			t.Fatalf("Records: checkpoint of %q is %q; want %q", w.partition, r.Checkpoint, w.checkpoint)
		case !w.hasCheckpoint && r.CheckpointAge != 0:
			t.Fatalf("Records: %q has no checkpoint but a checkpoint age of %v; want 0", w.partition, r.CheckpointAge)
		}
		e.wantAge(fmt.Sprintf("Since of %q", w.partition), r.Since, start)
		e.wantAge(fmt.Sprintf("CheckpointAge of %q", w.partition), r.CheckpointAge, start)
	}

	if rs := e.records(); len(rs) != 0 {
		t.Fatalf("Records() returned %s; want nothing", fmtRecords(rs))
	}
	if rs := e.records("missing"); len(rs) != 0 {
		t.Fatalf("Records of a partition without a record returned %s; want nothing", fmtRecords(rs))
	}
	rs, err := e.s.Records(e.ctx, newGroup(t, "-never-written"), []string{"pa"})
	if err != nil || len(rs) != 0 {
		t.Fatalf("Records in a group never written: %s, %v; want nothing and no error", fmtRecords(rs), err)
	}
	if after := e.snap(); after.Version != snap.Version {
		t.Fatalf("the group's version went from %v to %v across Records calls; want it unchanged (Records writes and logs nothing)", snap.Version, after.Version)
	}

	// A batch of MaxBatch partitions is one call.
	many := make([]string, store.MaxBatch)
	for i := range many {
		many[i] = fmt.Sprintf("q%04d", i)
	}
	many[store.MaxBatch-1] = "pa"
	if rs := e.records(many...); len(rs) != 1 || rs[0].Partition != "pa" {
		t.Fatalf("Records of %d partitions, only the last with a record: %s; want pa's record", len(many), fmtRecords(rs))
	}
}

// testRecordsInvalid: Records refuses what ValidateBatch refuses, and a
// malformed group, with ErrInvalid.
func testRecordsInvalid(e *env) {
	t := e.t
	s := e.open("member", longTTL)
	e.claim("p", s)
	bad := map[string][]string{
		"MaxBatch+1 partitions": make([]string, store.MaxBatch+1),
		"a duplicate":           {"p", "q", "p"},
	}
	for i, id := range malformedIDs() {
		bad[fmt.Sprintf("malformed id %d (%s)", i, quote(id))] = []string{"p", id}
	}
	for name, ps := range bad {
		_, err := e.s.Records(e.ctx, e.group, ps)
		wantErr(t, err, store.ErrInvalid, "Records with "+name, "a batch is at most MaxBatch valid ids, none twice")
	}
	for _, g := range malformedIDs() {
		_, err := e.s.Records(e.ctx, g, []string{"p"})
		wantErr(t, err, store.ErrInvalid, "Records(group "+quote(g)+")", "a malformed group id")
	}
}

// testRecordsTimes: Since is the time since the record got its epoch (a
// Claim, ClaimBatch or Restore; not a Release or a Checkpoint), and
// CheckpointAge the time since the last accepted Checkpoint (a refused one
// changes nothing), both on the store's clock.
func testRecordsTimes(e *env) {
	t := e.t
	a := e.open("member-a", longTTL)
	b := e.open("member-b", longTTL)
	claimed := time.Now()
	o := e.claim("p", a)
	e.checkpoint("p", o.Epoch, "one")

	// Both times grow with the store's clock, as fast as the local one.
	var r store.Record
	e.waitUntil(10*time.Second, fmt.Sprintf("Since and CheckpointAge of p to reach %v", ageWait), func() bool {
		r = e.oneRecord("p")
		return r.Since >= ageWait && r.CheckpointAge >= ageWait
	})
	if elapsed := time.Since(claimed); elapsed+ageSlack < r.Since {
		t.Fatalf("Since of p is %v only %v after the claim; want at most %v (the store's clock runs as fast as the local one)", r.Since, elapsed, elapsed+ageSlack)
	}

	// A checkpoint resets CheckpointAge, not Since.
	before := time.Now()
	e.checkpoint("p", o.Epoch, "two")
	r2 := e.oneRecord("p")
	e.wantAge("CheckpointAge right after a Checkpoint", r2.CheckpointAge, before)
	if r2.Since < r.Since {
		t.Fatalf("Since went from %v to %v across a Checkpoint; want it to keep growing (the epoch did not change)", r.Since, r2.Since)
	}
	if string(r2.Checkpoint) != "two" {
		t.Fatalf("Records after Checkpoint(\"two\"): checkpoint %q; want \"two\"", r2.Checkpoint)
	}

	// A refused checkpoint (stale epoch) changes neither.
	o2 := e.claim("p", a)
	e.waitUntil(10*time.Second, fmt.Sprintf("CheckpointAge of p to reach %v", ageWait), func() bool {
		r = e.oneRecord("p")
		return r.CheckpointAge >= ageWait
	})
	err := e.s.Checkpoint(e.ctx, e.group, "p", o.Epoch, []byte("stale"))
	wantErr(t, err, store.ErrNotOwner, "Checkpoint at a replaced epoch", "fenced")
	if r3 := e.oneRecord("p"); r3.CheckpointAge < r.CheckpointAge || string(r3.Checkpoint) != "two" {
		t.Fatalf("after a refused Checkpoint: checkpoint %q, age %v (was %v); want \"two\", still growing", r3.Checkpoint, r3.CheckpointAge, r.CheckpointAge)
	}

	// A release keeps Since; a claim by another session resets it.
	e.release("p", a, o2.Epoch)
	e.waitUntil(10*time.Second, fmt.Sprintf("Since of the released p to reach %v", ageWait), func() bool {
		r = e.oneRecord("p")
		return r.Since >= ageWait
	})
	if r.Session != "" || r.Epoch != o2.Epoch {
		t.Fatalf("Records after Release: %s; want released at epoch %d", fmtOwner(r.Ownership), o2.Epoch)
	}
	before = time.Now()
	ob := e.claim("p", b)
	r = e.oneRecord("p")
	if r.Epoch != ob.Epoch || r.Session != b {
		t.Fatalf("Records after a new Claim: %s; want %s", fmtOwner(r.Ownership), fmtOwner(ob))
	}
	e.wantAge("Since right after a Claim by another session", r.Since, before)
	if r.CheckpointAge < ageWait {
		t.Fatalf("CheckpointAge is %v right after a Claim; want at least %v (a claim writes no checkpoint)", r.CheckpointAge, ageWait)
	}

	// ClaimBatch and Restore set Since too (Restore the checkpoint's age).
	before = time.Now()
	rs, err := e.s.ClaimBatch(e.ctx, e.group, a, []string{"q"})
	if err != nil || len(rs) != 1 || rs[0].Err != nil {
		t.Fatalf("ClaimBatch(q): %v, %v; want q claimed", rs, err)
	}
	e.wantAge("Since right after a ClaimBatch", e.oneRecord("q").Since, before)
	before = time.Now()
	if err := e.s.Restore(e.ctx, e.group, "lost", 7_000_000, []byte("back")); err != nil {
		t.Fatalf("Restore: %v; want success", err)
	}
	r = e.oneRecord("lost")
	e.wantAge("Since right after a Restore", r.Since, before)
	e.wantAge("CheckpointAge right after a Restore", r.CheckpointAge, before)
	if string(r.Checkpoint) != "back" || r.Epoch != 7_000_000 || r.Session != "" {
		t.Fatalf("Records after Restore: %s; want released at epoch 7000000 with checkpoint \"back\"", fmtOwner(r.Ownership))
	}
}
