package main

import (
	"path/filepath"
	"testing"
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
	waitLoads(t, db, "cpu", "key", 0.05, 0.01)
}
