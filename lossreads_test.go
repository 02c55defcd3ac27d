package herd_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// TestNoGroupReadPerAttemptAfterAnOutage: a member cut off from a store
// that keeps its data loses its session and tries to open another until the
// cut heals. It reads the whole group once when the new session opens (its
// copy starts anew), not once more before every attempt to see whether the
// store lost the partition set: the log going on from where it was says it
// did not, and while the store does not answer, a read of the whole group
// would not be answered either.
func TestNoGroupReadPerAttemptAfterAnOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		f := newFleet(t, ctx, 16)
		f.cfg.SessionTTL = 2 * time.Second
		ids := f.join(2)
		f.settle(5 * time.Second)
		cut := f.members[ids[0]]
		old := cut.m.Session()
		before := cut.fault.Ops()
		cut.fault.SetCut(true)
		time.Sleep(6 * time.Second) // three TTLs: several attempts to open a session
		cut.fault.SetCut(false)
		waitSession(t, cut, old, 5*time.Second)
		f.settle(10 * time.Second)
		after := cut.fault.Ops()
		// Reads are Snapshot and Records calls, those the cut failed too;
		// the new session's read of the group is one, and the check of
		// its own records (every PollInterval) may be another.
		t.Logf("reads through the outage and back: %d", after.Reads-before.Reads)
		if n := after.Reads - before.Reads; n > 2 {
			t.Errorf("the member read the group %d times through the outage and back; want at most 2", n)
		}
		f.check("after the outage", false)
		for _, id := range f.live() {
			if err := f.drop(id).m.Leave(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
}
