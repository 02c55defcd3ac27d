package redisstore

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
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
	must(t, setErr(s.SetPartitions(ctx, g, store.PartitionSet{})), "SetPartitions(empty)")
	stored("after SetPartitions(empty)", true)
	if n, _ := raw.Exists(ctx, k.partitions).Result(); n != 0 {
		t.Fatalf("an empty set left a partitions hash")
	}
	must(t, setErr(s.SetPartitions(ctx, g, store.PartitionSet{Partitions: []store.Partition{{ID: "a"}}})), "SetPartitions")
	must(t, raw.Del(ctx, k.partset).Err(), "DEL partset")
	stored("a partitions hash without partset (an older version's)", true)
	must(t, raw.Del(ctx, k.partitions).Err(), "DEL partitions")
	stored("both keys lost", false)
}

// TestPartListRead: a Snapshot reads the set from partlist when partset
// says it holds it, and from the hash when an older version wrote the set
// (partset "1", partlist stale) or partlist does not decode.
func TestPartListRead(t *testing.T) {
	s, raw := newTestStore(t)
	ctx := ctxT(t)
	const g = "partlist"
	k := s.keys(g)
	ids := func(why string) []string {
		t.Helper()
		snap, err := s.Snapshot(ctx, g)
		must(t, err, "Snapshot")
		var out []string
		for _, p := range snap.Partitions {
			out = append(out, p.ID+":"+strconv.Itoa(p.Weight))
		}
		return out
	}
	want := func(why string, got []string, w ...string) {
		t.Helper()
		if !slices.Equal(got, w) {
			t.Fatalf("%s: partitions %q; want %q", why, got, w)
		}
	}
	must(t, setErr(s.SetPartitions(ctx, g, store.PartitionSet{Partitions: []store.Partition{{ID: "b", Weight: 2}, {ID: "a"}, {ID: "c"}}})), "SetPartitions")
	if v, _ := raw.Get(ctx, k.partlist).Result(); v != "a\x1f0\x1eb\x1f2\x1ec\x1f0\x1e" {
		t.Fatalf("partlist %q", v)
	}
	want("written by this version", ids(""), "a:0", "b:2", "c:0")
	// An older version sets {x}: the hash and partset "1", partlist left.
	must(t, raw.Del(ctx, k.partitions).Err(), "DEL")
	must(t, raw.HSet(ctx, k.partitions, "x", "1").Err(), "HSET")
	must(t, raw.Set(ctx, k.partset, "1", 0).Err(), "SET partset")
	want("written by an older version", ids(""), "x:1")
	// partset "2" but partlist broken (by hand): the hash.
	must(t, raw.Set(ctx, k.partset, "2", 0).Err(), "SET partset")
	for _, bad := range []string{"x", "b\x1f1\x1ea\x1f1\x1e", "a\x1f-1\x1e", "a\x01b\x1f1\x1e"} {
		must(t, raw.Set(ctx, k.partlist, bad, 0).Err(), "SET partlist")
		want(fmt.Sprintf("partlist %q", bad), ids(""), "x:1")
	}
	must(t, raw.Del(ctx, k.partlist).Err(), "DEL partlist")
	want("partlist lost", ids(""), "x:1")
	// An emptied set.
	must(t, setErr(s.SetPartitions(ctx, g, store.PartitionSet{})), "SetPartitions(empty)")
	snap, err := s.Snapshot(ctx, g)
	must(t, err, "Snapshot")
	if len(snap.Partitions) != 0 || !snap.PartitionSetStored {
		t.Fatalf("emptied set: %d partitions, stored %v", len(snap.Partitions), snap.PartitionSetStored)
	}
}

func TestPartListRoundTrip(t *testing.T) {
	ps := []store.Partition{{ID: "z", Weight: 3}, {ID: "a b"}, {ID: "日本", Weight: 1}}
	got, ok := decodePartList(encodePartList(ps))
	slices.SortFunc(ps, func(a, b store.Partition) int { return strings.Compare(a.ID, b.ID) })
	if !ok || !slices.Equal(got, ps) {
		t.Fatalf("round trip: %v, %v; want %v", got, ok, ps)
	}
	if got, ok := decodePartList(""); !ok || len(got) != 0 {
		t.Fatalf("empty: %v, %v", got, ok)
	}
}
