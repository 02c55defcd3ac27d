package main

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/store/faultstore"
	"github.com/herdhq/herd/store/memstore"
)

// A child that asks to checkpoint after it was fenced gets the partition's
// current epoch from the member's copy of the group: a child retrying in a
// loop costs the store nothing, where each reply used to read the whole
// group (a Snapshot, O(partitions)).
func TestFencedCheckpointReplyReadsNoSnapshot(t *testing.T) {
	st := faultstore.Wrap(memstore.New())
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	m, err := herd.Join(ctx, st, herd.Config{
		Group: "g", Member: "a", Partitions: herd.Numbered(4), Logger: slog.New(slog.DiscardHandler),
		Handler: func(c *herd.Claim) error { <-c.Context().Done(); return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Leave(context.Background())
	deadline := time.Now().Add(10 * time.Second)
	for len(m.Owned()) < 4 {
		if time.Now().After(deadline) {
			t.Fatalf("the member owns %v; want 4 partitions", m.Owned())
		}
		time.Sleep(10 * time.Millisecond) // polling a condition, with a deadline
	}
	snap, err := st.Snapshot(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{}
	for _, o := range snap.Owners {
		want[o.Partition] = o.Epoch
	}
	for m.KnownEpoch("1") != want["1"] { // the copy learns the claims from the log
		if time.Now().After(deadline) {
			t.Fatalf("the member's copy shows epoch %d for partition 1; want %d", m.KnownEpoch("1"), want["1"])
		}
		time.Sleep(10 * time.Millisecond) // polling a condition, with a deadline
	}
	// The runner of this member has no claim on record (its child's claim
	// ended): every request is fenced.
	r := &runner{group: "g", claims: map[string]*herd.Claim{}}
	r.joined.Store(m)
	before := st.Ops().Reads
	for range 50 {
		rep := r.save(ctx, "1", 1, []byte("v"))
		if !rep.Fenced || rep.Current != want["1"] {
			t.Fatalf("reply %+v; want fenced with the current epoch %d", rep, want["1"])
		}
	}
	if n := st.Ops().Reads - before; n != 0 {
		t.Errorf("50 fenced replies read the group %d times; want 0 (the member's copy knows the epoch)", n)
	}
	if got := m.KnownEpoch("nosuch"); got != 0 {
		t.Errorf("KnownEpoch of a partition without a record: %d; want 0", got)
	}
}
