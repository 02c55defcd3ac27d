package redisstore

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
)

// ChangesInto returns what Changes returns, decoded into dst's array when
// it has room (so a caller's list is reused), and in a list of its own
// when it has not.
func TestChangesInto(t *testing.T) {
	s, _ := newTestStore(t)
	ctx := ctxT(t)
	const g = "into"
	sess, err := s.OpenSession(ctx, g, "m", 1, time.Minute)
	must(t, err, "OpenSession")
	snap, err := s.Snapshot(ctx, g)
	must(t, err, "Snapshot")
	parts := make([]string, 250)
	for i := range parts {
		parts[i] = fmt.Sprintf("p-%03d", i)
	}
	_, err = s.ClaimBatch(ctx, g, sess, parts)
	must(t, err, "ClaimBatch")
	want, wantV, err := s.Changes(ctx, g, snap.Version, 200)
	must(t, err, "Changes")

	dst := make([]store.Change, 7, 300)
	for i := range dst {
		dst[i] = store.Change{Kind: store.Released, Partition: "stale", Loads: []store.Load{{Partition: "x"}}}
	}
	got, v, err := s.ChangesInto(ctx, g, snap.Version, 200, dst)
	must(t, err, "ChangesInto")
	if !reflect.DeepEqual(got, want) || v != wantV {
		t.Fatalf("ChangesInto: %d changes up to %v; Changes %d up to %v, or they differ", len(got), v, len(want), wantV)
	}
	if &got[0] != &dst[:1][0] {
		t.Fatal("ChangesInto did not decode into dst's array, which had room")
	}

	small := make([]store.Change, 0, 10)
	got, _, err = s.ChangesInto(ctx, g, snap.Version, 200, small)
	must(t, err, "ChangesInto")
	if !reflect.DeepEqual(got, want) || &got[0] == &small[:1][0] {
		t.Fatalf("ChangesInto with a list too small: %d changes (want %d), in the list's array: %v", len(got), len(want), &got[0] == &small[:1][0])
	}
}
