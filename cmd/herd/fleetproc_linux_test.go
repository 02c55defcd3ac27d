package main

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/storeurl"
)

// A bench member process runs at the lowest priority (memberNice), so that
// a store server on the same host is not starved by the members.
func TestBenchMemberRunsAtLowPriority(t *testing.T) {
	url := "sqlite://" + filepath.Join(t.TempDir(), "bench.db")
	connect := func(ctx context.Context) (store.Store, error) { return storeurl.Open(ctx, url) }
	f := newProcFleet(herdExe(t), url, "low-priority", 4, 3*time.Second, false, connect, nil)
	defer func() {
		if err := f.close(); err != nil {
			t.Error(err)
		}
	}()
	if err := f.setup(t.Context()); err != nil {
		t.Fatal(err)
	}
	m, err := f.start()
	if err != nil {
		t.Fatal(err)
	}
	if err := <-m.joined; err != nil { // stopped once it has joined, it leaves
		t.Fatal(err)
	}
	// The raw getpriority returns 20 - nice.
	prio, err := syscall.Getpriority(syscall.PRIO_PROCESS, m.cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if nice := 20 - prio; nice != memberNice {
		t.Errorf("member process's nice value is %d; want %d", nice, memberNice)
	}
}
