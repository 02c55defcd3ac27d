package herd_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/memstore"
)

// DeleteGroup refuses while a member runs, and deletes the group once it has
// left.
func TestDeleteGroup(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	st := memstore.New()
	m, err := herd.Join(ctx, st, herd.Config{Group: "g", Member: "m1", Partitions: herd.Numbered(4),
		Handler: func(c *herd.Claim) error { <-c.Context().Done(); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	if err := herd.DeleteGroup(ctx, st, "g", false); !errors.Is(err, herd.ErrGroupInUse) {
		t.Fatalf("DeleteGroup with a live member: %v; want ErrGroupInUse", err)
	}
	if err := m.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if err := herd.DeleteGroup(ctx, st, "g", false); err != nil {
		t.Fatalf("DeleteGroup after Leave: %v", err)
	}
	snap, err := st.Snapshot(ctx, "g")
	if err != nil || len(snap.Sessions)+len(snap.Partitions)+len(snap.Owners) != 0 {
		t.Fatalf("after DeleteGroup: %+v, %v; want an empty group", snap, err)
	}
	if err := herd.DeleteGroup(ctx, st, "", true); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("DeleteGroup of an empty group id: %v; want ErrInvalid", err)
	}
}
