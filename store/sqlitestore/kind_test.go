package sqlitestore_test

import (
	"path/filepath"
	"testing"

	"github.com/herdhq/herd/store"
)

// A file written by a herd before the group's kind (herd_groups without
// the columns kind and digest) is brought up to date by Open, keeping its
// groups: a member then checks and records the kind as in a new file.
func TestOpenAddsKindToAnOlderFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	s := open(t, path)
	if _, err := s.SetPartitions(t.Context(), "g", store.PartitionSet{Partitions: []store.Partition{{ID: "a"}}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	db := rawDB(t, path)
	exec1(t, db, `ALTER TABLE herd_groups DROP COLUMN kind`)
	exec1(t, db, `ALTER TABLE herd_groups DROP COLUMN digest`)
	db.Close()

	s = open(t, path)
	res, err := s.SetPartitions(t.Context(), "g", store.PartitionSet{Kind: store.KindKeys, Partitions: []store.Partition{{ID: "a"}}, Mode: store.SetIfAbsent})
	if err != nil {
		t.Fatalf("SetPartitions on a file of an older herd: %v", err)
	}
	if res.Kind != store.KindKeys || !res.Stored || res.Written {
		t.Fatalf("SetPartitions(keys, if absent) on the older file's group = %+v; want kind keys, the stored set kept", res)
	}
	if _, err := s.SetPartitions(t.Context(), "g", store.PartitionSet{Kind: store.KindPartitions, Mode: store.SetKindOnly}); err == nil {
		t.Fatal("a member of kind partitions joined the group of keys; want ErrGroupKind")
	}
}
