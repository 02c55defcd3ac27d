package sqlitestore_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
)

// A file written by a herd before the log's time (herd_log without the
// column at) is brought up to date by Open: its entries read with a zero
// At, the entries written after carry the time, and a herd before the
// column (whose INSERT names only the columns it knows) still appends.
func TestOpenAddsLogTimeToAnOlderFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	s := open(t, path)
	if _, err := s.SetPartitions(t.Context(), "g", store.PartitionSet{Partitions: []store.Partition{{ID: "a"}}}); err != nil {
		t.Fatal(err)
	}
	snap, err := s.Snapshot(t.Context(), "g")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetPartitions(t.Context(), "g", store.PartitionSet{Partitions: []store.Partition{{ID: "b"}}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	db := rawDB(t, path)
	exec1(t, db, `ALTER TABLE herd_log DROP COLUMN at`)
	db.Close()

	s = open(t, path)
	begin := time.Now()
	if _, err := s.SetPartitions(t.Context(), "g", store.PartitionSet{Partitions: []store.Partition{{ID: "c"}}}); err != nil {
		t.Fatalf("SetPartitions on a file of an older herd: %v", err)
	}
	end := time.Now()
	cs, _, err := s.Changes(t.Context(), "g", snap.Version, 10)
	if err != nil || len(cs) != 2 {
		t.Fatalf("Changes = %d entries, %v; want 2", len(cs), err)
	}
	if !cs[0].At.IsZero() {
		t.Errorf("the older herd's entry has At %v; want zero (unknown)", cs[0].At)
	}
	// The host's wall clock, to the µs.
	if at := cs[1].At; at.Before(begin.Truncate(time.Microsecond)) || at.After(end) {
		t.Errorf("the new entry's At %v is not within its write [%v, %v]", at, begin, end)
	}
	s.Close()

	db = rawDB(t, path)
	defer db.Close()
	exec1(t, db, `INSERT INTO herd_log (gid, seq, tag, kind, session, member, weight, partition, epoch, given_back, partitions)
		SELECT gid, seq + 1, 1, kind, session, member, weight, partition, epoch, given_back, partitions FROM herd_log WHERE seq = 3`)
	var at int64
	if err := db.QueryRow(`SELECT at FROM herd_log WHERE seq = 4`).Scan(&at); err != nil || at != 0 {
		t.Fatalf("an older herd's entry: at = %d, %v; want the default 0", at, err)
	}
}
