package etcdstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
)

// TestPackedLog: the entries of one transaction share a key; a reader
// whose version is in the middle of a key, or that asks for fewer entries
// than a key holds, reads each entry once, in order, without a gap.
func TestPackedLog(t *testing.T) {
	s, _ := openTest(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	const group = "packed"
	sess, err := s.OpenSession(ctx, group, "m", 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := s.Snapshot(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, 7)
	for i := range ids {
		ids[i] = fmt.Sprintf("p%d", i)
	}
	if _, err := s.ClaimBatch(ctx, group, sess, ids); err != nil {
		t.Fatal(err)
	}
	var got []string
	for v := snap.Version; len(got) < len(ids); {
		cs, next, err := s.Changes(ctx, group, v, 3)
		if err != nil {
			t.Fatalf("Changes(after %v, 3): %v", v, err)
		}
		if len(cs) == 0 || len(cs) > 3 {
			t.Fatalf("Changes(after %v, 3): %d entries; want 1 to 3", v, len(cs))
		}
		for _, c := range cs {
			if c.Version.Seq != v.Seq+1 || c.Kind != store.Claimed {
				t.Fatalf("entry %+v after %v; want the Claimed entry at seq %d", c, v, v.Seq+1)
			}
			got = append(got, c.Partition)
			v = c.Version
		}
		if next != v {
			t.Fatalf("Changes returned version %v; want its last entry's %v", next, v)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(ids) {
		t.Fatalf("claims read from the log: %v; want %v", got, ids)
	}
	if err := s.DeleteGroup(ctx, group, true); err != nil {
		t.Fatal(err)
	}
}
