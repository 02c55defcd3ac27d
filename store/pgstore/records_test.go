package pgstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
)

// GiveBack releases like Release and marks the record; the mark survives a
// claim by another session and is cleared by a claim of the session that
// gave it back. Records shows records with checkpoints and times.
func TestGiveBackAndRecords(t *testing.T) {
	s := openTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const group = "giveback"
	a, err := s.OpenSession(ctx, group, "a", 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.OpenSession(ctx, group, "b", 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	o, err := store.Claim(ctx, s, group, "p", a)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Checkpoint(ctx, group, "p", o.Epoch, []byte("cp")); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Claim(ctx, s, group, "q", b); err != nil {
		t.Fatal(err)
	}
	rs, err := s.Records(ctx, group, []string{"q", "none", "p"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[0].Partition != "q" || rs[1].Partition != "p" {
		t.Fatalf("Records(q, none, p) = %+v; want q and p in that order", rs)
	}
	if r := rs[1]; r.Session != a || r.Member != "a" || r.Epoch != o.Epoch || string(r.Checkpoint) != "cp" ||
		r.Since < 0 || r.Since > time.Minute || r.CheckpointAge < 0 || r.CheckpointAge > r.Since || r.GivenBack != "" {
		t.Fatalf("Records p = %+v", r)
	}
	if rs[0].Checkpoint != nil || rs[0].CheckpointAge != 0 {
		t.Fatalf("Records q (never checkpointed) = %+v; want no checkpoint and age 0", rs[0])
	}
	if _, err := s.Records(ctx, group, []string{"p", "p"}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Records with a duplicate: %v; want ErrInvalid", err)
	}

	v := mustSnap(t, s, group).Version
	if err := s.GiveBack(ctx, group, "p", b, o.Epoch); !errors.Is(err, store.ErrNotOwner) {
		t.Fatalf("GiveBack by another session: %v; want ErrNotOwner", err)
	}
	if err := s.GiveBack(ctx, group, "p", a, o.Epoch); err != nil {
		t.Fatal(err)
	}
	if r := ownerOf(t, s, group, "p"); r.Session != "" || r.GivenBack != a || r.Epoch != o.Epoch {
		t.Fatalf("record after GiveBack: %+v; want released, given back by %q", r, a)
	}
	ob, err := store.Claim(ctx, s, group, "p", b)
	if err != nil || ob.GivenBack != a || string(ob.Checkpoint) != "cp" {
		t.Fatalf("Claim by another session after GiveBack: %+v, %v; want the mark kept and the checkpoint", ob, err)
	}
	if err := store.Release(ctx, s, group, "p", b, ob.Epoch); err != nil {
		t.Fatal(err)
	}
	oa, err := store.Claim(ctx, s, group, "p", a)
	if err != nil || oa.GivenBack != "" {
		t.Fatalf("Claim by the session that gave it back: %+v, %v; want the mark cleared", oa, err)
	}
	cs, _, err := s.Changes(ctx, group, v, 10)
	if err != nil || len(cs) != 4 {
		t.Fatalf("entries after GiveBack: %+v, %v; want 4", cs, err)
	}
	want := []struct {
		kind      store.ChangeKind
		session   string
		givenBack string
	}{{store.Released, a, a}, {store.Claimed, b, a}, {store.Released, b, a}, {store.Claimed, a, ""}}
	for i, w := range want {
		if c := cs[i]; c.Kind != w.kind || c.Session != w.session || c.GivenBack != w.givenBack || c.Partition != "p" {
			t.Fatalf("entry %d = %+v; want %v by %q with GivenBack %q", i, c, w.kind, w.session, w.givenBack)
		}
	}
}

func mustSnap(t *testing.T, s *Store, group string) *store.Snapshot {
	t.Helper()
	snap, err := s.Snapshot(context.Background(), group)
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func ownerOf(t *testing.T, s *Store, group, partition string) store.Ownership {
	t.Helper()
	for _, o := range mustSnap(t, s, group).Owners {
		if o.Partition == partition {
			return o
		}
	}
	t.Fatalf("no record of %q", partition)
	return store.Ownership{}
}

// Rows written by hand that do not decode are listed in Malformed and
// left out; a claim of such a record fails with ErrCorrupt and writes
// nothing; the rest of the group works.
func TestMalformedRows(t *testing.T) {
	s := openTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const group = "malformed"
	sess, err := s.OpenSession(ctx, group, "m", 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetPartitions(ctx, group, store.PartitionSet{Partitions: []store.Partition{{ID: "good"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Claim(ctx, s, group, "good", sess); err != nil {
		t.Fatal(err)
	}
	S := s.qschema
	gid := "(SELECT gid FROM " + S + ".groups WHERE name = '" + group + "')"
	admin(t, "INSERT INTO "+S+".sessions (gid, id, member, weight, expires) VALUES ("+gid+", 'not-a-session-id', 'x', 1, now() + interval '1 hour')")
	admin(t, "INSERT INTO "+S+".partitions (gid, id, weight) VALUES ("+gid+", E'tab\\there', 1)")
	admin(t, "INSERT INTO "+S+".owners (gid, partition, session, member, epoch) VALUES ("+gid+", 'badowner', 'lowercase-session', 'x', 5)")
	snap := mustSnap(t, s, group)
	if len(snap.Malformed) != 3 {
		t.Fatalf("Malformed = %+v; want the three rows written by hand", snap.Malformed)
	}
	for i, kind := range []string{store.MalformedOwnership, store.MalformedPartition, store.MalformedSession} {
		if snap.Malformed[i].Kind != kind || snap.Malformed[i].Reason == "" {
			t.Fatalf("Malformed[%d] = %+v; want kind %s with a reason", i, snap.Malformed[i], kind)
		}
	}
	if len(snap.Sessions) != 1 || len(snap.Partitions) != 1 || len(snap.Owners) != 1 {
		t.Fatalf("snapshot lists %d sessions, %d partitions, %d records; want the good ones only", len(snap.Sessions), len(snap.Partitions), len(snap.Owners))
	}
	if _, err := store.Claim(ctx, s, group, "badowner", sess); !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("Claim of a malformed record: %v; want ErrCorrupt", err)
	}
	rs, err := s.ClaimBatch(ctx, group, sess, []string{"good", "badowner"})
	if err != nil || rs[0].Err != nil || !errors.Is(rs[1].Err, store.ErrCorrupt) {
		t.Fatalf("ClaimBatch of a good and a malformed record: %+v, %v", rs, err)
	}
	if rec, err := s.Records(ctx, group, []string{"badowner", "good"}); err != nil || len(rec) != 1 || rec[0].Partition != "good" {
		t.Fatalf("Records of a malformed and a good record: %+v, %v; want the good one", rec, err)
	}
	// A log entry written by hand ends the readers' version.
	v := mustSnap(t, s, group).Version
	admin(t, "INSERT INTO "+S+".log (gid, seq, tag, kind) VALUES ("+gid+", $1, 7, 99)", int64(v.Seq+1))
	admin(t, "UPDATE "+S+".groups SET seq = seq + 1, tag = 7 WHERE name = '"+group+"'")
	if _, _, err := s.Changes(ctx, group, v, 10); !errors.Is(err, store.ErrVersionGone) {
		t.Fatalf("Changes over an entry that does not decode: %v; want ErrVersionGone", err)
	}
	if _, err := store.Claim(ctx, s, group, "good", sess); err != nil {
		t.Fatalf("Claim after the bad entry: %v", err)
	}
}
