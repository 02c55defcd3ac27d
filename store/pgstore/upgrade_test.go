package pgstore

import (
	"testing"

	"github.com/herdhq/herd/store"
)

// A schema of version 1 (before the group's kind) is upgraded by Open to
// version 2, keeping its groups; the set_partitions of version 1, which
// members of that version still running call, then clears the digest so
// that their set is never taken for the one whose digest was kept.
func TestOpenUpgradesSchemaV1(t *testing.T) {
	requireServer(t)
	schema := newSchema(t)
	s := openIn(t, schema)
	set := []store.Partition{{ID: "a"}}
	if _, err := s.SetPartitions(t.Context(), "g", store.PartitionSet{Partitions: set}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	q := `"` + schema + `"`
	admin(t, `ALTER TABLE `+q+`.groups DROP COLUMN kind, DROP COLUMN digest`)
	admin(t, `DROP FUNCTION `+q+`.set_partition_set`)
	admin(t, `UPDATE `+q+`.schema_version SET version = 1`)

	s = openIn(t, schema)
	res, err := s.SetPartitions(t.Context(), "g", store.PartitionSet{Kind: store.KindPartitions, Partitions: set})
	if err != nil {
		t.Fatalf("SetPartitions after the upgrade: %v", err)
	}
	if res.Kind != store.KindPartitions || !res.Written {
		t.Fatalf("SetPartitions after the upgrade = %+v; want kind partitions, written (the digest was unknown)", res)
	}
	// A member of version 1 sets another set: the digest is cleared.
	admin(t, `SELECT `+q+`.set_partitions('g', ARRAY['b'], ARRAY[1], 100)`)
	res, err = s.SetPartitions(t.Context(), "g", store.PartitionSet{Kind: store.KindPartitions, Partitions: set})
	if err != nil || !res.Written {
		t.Fatalf("SetPartitions of the first set again, after a member of version 1 set another = %+v, %v; want written", res, err)
	}
}
