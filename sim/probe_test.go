package sim

import (
	"testing"
	"testing/synctest"
)

// TestProbeReconcile runs the reconcile probe on a small group: each
// forced resync costs the member exactly one read of the group (the probe
// checks it), and the figures are filled in.
func TestProbeReconcile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pc, err := ProbeReconcile(t.Context(), 10, 1000, synctest.Wait)
		if err != nil {
			t.Fatal(err)
		}
		if pc.Reads == 0 || pc.SnapshotBytes == 0 || pc.Members != 10 || pc.Partitions != 1000 {
			t.Fatalf("probe result %+v", pc)
		}
	})
}
