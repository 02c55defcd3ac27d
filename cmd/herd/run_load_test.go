package main

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/sqlitestore"
)

// herd run publishes each child's load, the CPU time of its process group
// per second: a child that spins shows about one CPU, one that sleeps
// none, in the store's loads (what herd status shows).
func TestRunPublishesChildCPU(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "herd.db")
	startRunIn(t, "m1", dir, nil, "--store", "sqlite://"+db, "--group", "cpu", "--partitions", "0-1",
		"--load-interval", "2s", "--", "/bin/sh", "-c", `if [ "$HERD_PARTITION" = 0 ]; then while :; do :; done; else exec sleep 600; fi`)
	waitLoads(t, db, "cpu", "partition", 0.2, 0.05)
}

// waitLoads waits until the group's published loads of "0" and "1" (in
// the SQLite file db) are above hot and below cold, and logs them.
func waitLoads(t *testing.T, db, group, noun string, hot, cold float64) {
	t.Helper()
	st, err := sqlitestore.Open(t.Context(), "sqlite://"+db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	var loads []store.Load
	eventually(t, 60*time.Second, fmt.Sprintf("%s 0's load above %v CPU, %s 1's below %v", noun, hot, noun, cold), func() bool {
		snap, err := st.Snapshot(t.Context(), group)
		if err != nil {
			return false
		}
		loads = snap.Loads
		l0, ok0 := snap.LoadOf("0")
		l1, ok1 := snap.LoadOf("1")
		return ok0 && ok1 && l0 > hot && l1 < cold
	})
	t.Logf("published loads: %v", loads)
}
