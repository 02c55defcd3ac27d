package main

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/sqlitestore"
)

// herd jobs publishes each key's load, the CPU time of its runs per second
// of its schedule: a key whose runs spin for about 0.7 s of CPU every 4 s
// shows about 0.18, one whose runs sleep about nothing, in the store's
// loads (what herd status shows).
func TestJobsPublishesRunCPU(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "herd.db")
	startHerdIn(t, "m1", dir, nil, "jobs", "--store", "sqlite://"+db, "--group", "cpu", "--keys", "0,1",
		"--every", "4s", "--no-spread", "--load-interval", "2s", "--", "/bin/sh", "-c",
		`if [ "$HERD_KEY" = 0 ]; then i=0; while [ $i -lt 1000000 ]; do i=$((i+1)); done; else sleep 1; fi`)
	st, err := sqlitestore.Open(t.Context(), "sqlite://"+db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	var loads []store.Load
	eventually(t, 60*time.Second, "key 0's load above 0.05 CPU, key 1's below 0.01", func() bool {
		snap, err := st.Snapshot(t.Context(), "cpu")
		if err != nil {
			return false
		}
		loads = snap.Loads
		l0, ok0 := snap.LoadOf("0")
		l1, ok1 := snap.LoadOf("1")
		return ok0 && ok1 && l0 > 0.05 && l1 < 0.01
	})
	t.Logf("published loads: %v", loads)
}
