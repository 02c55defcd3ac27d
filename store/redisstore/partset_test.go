package redisstore

import (
	"testing"

	"github.com/herdhq/herd/store"
)

// TestPartitionSetStored: an emptied set reads as stored (partset), a set
// written before partset existed (a hash alone) reads as stored too, and a
// set lost with the keys reads as not stored, so members put it back.
func TestPartitionSetStored(t *testing.T) {
	s, raw := newTestStore(t)
	ctx := ctxT(t)
	const g = "partset"
	k := s.keys(g)
	stored := func(why string, want bool) {
		t.Helper()
		snap, err := s.Snapshot(ctx, g)
		must(t, err, "Snapshot")
		if snap.PartitionSetStored != want {
			t.Fatalf("%s: PartitionSetStored = %v; want %v", why, snap.PartitionSetStored, want)
		}
	}
	stored("nothing written", false)
	must(t, s.SetPartitions(ctx, g, nil), "SetPartitions(empty)")
	stored("after SetPartitions(empty)", true)
	if n, _ := raw.Exists(ctx, k.partitions).Result(); n != 0 {
		t.Fatalf("an empty set left a partitions hash")
	}
	must(t, s.SetPartitions(ctx, g, []store.Partition{{ID: "a"}}), "SetPartitions")
	must(t, raw.Del(ctx, k.partset).Err(), "DEL partset")
	stored("a partitions hash without partset (an older version's)", true)
	must(t, raw.Del(ctx, k.partitions).Err(), "DEL partitions")
	stored("both keys lost", false)
}
