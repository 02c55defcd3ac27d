package etcdstore

import (
	"testing"
	"time"

	"github.com/herdhq/herd/store"
)

// TestWriteReturnsBeforeSequencing: a claim whose entry goes into a
// pending key returns once its transaction commits, readers have the
// entry from then on, and the store sequences the key afterwards.
func TestWriteReturnsBeforeSequencing(t *testing.T) {
	s, _ := openTest(t)
	ctx := t.Context()
	const group = "seqlater"
	// An entry left pending (by a writer that stopped before sequencing
	// it) makes the claim's entry go into a pending key too.
	sess, start := leavePendingEntry(ctx, t, s, group)
	returned := make(chan struct{})
	s.beforeSequence = func() {
		select {
		case <-returned:
		case <-time.After(5 * time.Second):
			t.Error("the claim had not returned 5 s after its transaction: it waited for its sequencing")
		}
	}
	if _, err := store.Claim(ctx, s, group, "q", sess); err != nil {
		t.Fatal(err)
	}
	close(returned)
	cs := mustChanges(t, s, group, start.Version)
	if len(cs) != 2 || cs[0].Kind != store.Restored || cs[1].Kind != store.Claimed {
		t.Fatalf("Changes after %v once the claim returned: %+v; want the restore and the claim", start.Version, cs)
	}
	assertNoPending(t, s, group)
	sequenced := mustChanges(t, s, group, start.Version)
	if len(sequenced) != 2 || sequenced[0].Version != cs[0].Version || sequenced[1].Version != cs[1].Version {
		t.Fatalf("Changes after %v once sequenced: %+v; want the entries as read before, at %v and %v", start.Version, sequenced, cs[0].Version, cs[1].Version)
	}
}
