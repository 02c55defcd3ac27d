package sqlitestore_test

import (
	"database/sql"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
)

// gid is the row id of group g.
func gid(t *testing.T, db *sql.DB, g string) int64 {
	t.Helper()
	var id int64
	if err := db.QueryRow("SELECT id FROM herd_groups WHERE name = ?", g).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// Rows written by hand (or by another program) that herd cannot use are
// left out of a snapshot and listed in Malformed; a call on such a record
// fails with ErrCorrupt for that partition alone; nothing else is
// disturbed.
func TestMalformedRows(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "herd.db")
	s := open(t, path)
	a, err := s.OpenSession(ctx, "g", "a", 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetPartitions(ctx, "g", store.PartitionSet{Partitions: []store.Partition{{ID: "good"}, {ID: "p0"}}}); err != nil {
		t.Fatal(err)
	}
	good, err := store.Claim(ctx, s, "g", "good", a)
	if err != nil {
		t.Fatal(err)
	}
	db := rawDB(t, path)
	id := gid(t, db, "g")
	future := time.Now().Add(time.Hour).UnixMicro()
	exec1(t, db, "INSERT INTO herd_sessions VALUES (?, 'handmade', 'm', 1, ?, 60000000)", id, future)
	exec1(t, db, "INSERT INTO herd_sessions VALUES (?, 'AAAAAAAAAAAAAAAAAAAAAAAAAA', 'bad\x01member', 1, ?, 60000000)", id, future)
	exec1(t, db, "INSERT INTO herd_partitions VALUES (?, 'bad\x02part', 1)", id)
	exec1(t, db, "INSERT INTO herd_partitions VALUES (?, 'heavy', -3)", id)
	exec1(t, db, "INSERT INTO herd_owners VALUES (?, 'p0', '', '', 0, '', NULL)", id)
	exec1(t, db, "INSERT INTO herd_owners VALUES (?, 'p1', '', 'ghost', 7, '', NULL)", id)

	snap, err := s.Snapshot(ctx, "g")
	if err != nil {
		t.Fatalf("Snapshot with malformed rows: %v; want a snapshot", err)
	}
	var kinds []string
	for _, m := range snap.Malformed {
		kinds = append(kinds, m.Kind+":"+m.ID)
		if m.Reason == "" {
			t.Errorf("Malformed %+v has no reason", m)
		}
	}
	want := []string{"ownership:p0", "ownership:p1", "partition:bad\x02part", "partition:heavy", "session:AAAAAAAAAAAAAAAAAAAAAAAAAA", "session:handmade"}
	if !slices.Equal(kinds, want) {
		t.Errorf("Malformed = %q; want %q", kinds, want)
	}
	if len(snap.Sessions) != 1 || snap.Sessions[0].ID != a || len(snap.Partitions) != 2 || len(snap.Owners) != 1 || snap.Owners[0].Epoch != good.Epoch {
		t.Errorf("snapshot beside the malformed rows: %+v; want a's session, good and p0, good's record", snap)
	}
	if _, err := store.Claim(ctx, s, "g", "p0", a); !errors.Is(err, store.ErrCorrupt) {
		t.Errorf("Claim of a record with epoch 0: %v; want ErrCorrupt", err)
	}
	rs, err := s.ClaimBatch(ctx, "g", a, []string{"p1", "fresh"})
	if err != nil || !errors.Is(rs[0].Err, store.ErrCorrupt) || rs[1].Err != nil {
		t.Errorf("ClaimBatch of a malformed and a fresh record: %+v, %v; want ErrCorrupt for the first only", rs, err)
	}
	if err := store.Release(ctx, s, "g", "p0", a, 1); !errors.Is(err, store.ErrCorrupt) {
		t.Errorf("Release of a malformed record: %v; want ErrCorrupt", err)
	}
	recs, err := s.Records(ctx, "g", []string{"p0", "good", "p1"})
	if err != nil || len(recs) != 1 || recs[0].Partition != "good" {
		t.Errorf("Records with malformed records asked for: %+v, %v; want only good's", recs, err)
	}
	var n int
	if err := db.QueryRow("SELECT count(*) FROM herd_owners WHERE partition = 'p0' AND epoch = 0").Scan(&n); err != nil || n != 1 {
		t.Errorf("the malformed record was changed: %d, %v", n, err)
	}
}

// An entry of the log edited by hand, or one herd cannot decode, ends a
// reader's version: it gets ErrVersionGone and reads a snapshot.
func TestMalformedLog(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "herd.db")
	s := open(t, path)
	if _, err := s.OpenSession(ctx, "g", "a", 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	v := mustSnap(t, s, "g").Version
	if _, err := s.OpenSession(ctx, "g", "b", 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	db := rawDB(t, path)
	exec1(t, db, "UPDATE herd_log SET member = 'x' WHERE seq = 2")
	_, _, err := s.Changes(ctx, "g", v, 10)
	if !errors.Is(err, store.ErrVersionGone) || !strings.Contains(err.Error(), "does not follow") {
		t.Errorf("Changes over an entry edited by hand: %v; want ErrVersionGone", err)
	}
	v = mustSnap(t, s, "g").Version
	id := gid(t, db, "g")
	// A whole entry appended by hand, of a kind herd does not know.
	exec1(t, db, "INSERT INTO herd_log VALUES (?, ?, 5, 99, '', '', 0, '', 0, '', NULL, 0)", id, v.Seq+1)
	exec1(t, db, "UPDATE herd_groups SET seq = seq + 1, tag = 5 WHERE id = ?", id)
	if _, _, err := s.Changes(ctx, "g", v, 10); !errors.Is(err, store.ErrVersionGone) {
		t.Errorf("Changes over an entry of an unknown kind: %v; want ErrVersionGone", err)
	}
	// The group goes on from a new snapshot.
	v = mustSnap(t, s, "g").Version
	if _, err := s.OpenSession(ctx, "g", "c", 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	cs, _, err := s.Changes(ctx, "g", v, 10)
	if err != nil || len(cs) != 1 || cs[0].Member != "c" {
		t.Errorf("Changes after a new snapshot: %+v, %v; want c's SessionOpened", cs, err)
	}
}

func mustSnap(t *testing.T, s store.Store, g string) *store.Snapshot {
	t.Helper()
	snap, err := s.Snapshot(t.Context(), g)
	if err != nil {
		t.Fatal(err)
	}
	return snap
}
