package proctest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/herdhq/herd/store/sqlitestore"
)

// The SQLite fleet: 8 processes on one database file, 64 partitions, a
// checkpoint every second per partition (64 commits a second, each synced
// to disk), the same 2s TTL. Every commit takes the file's one write lock:
// at 250ms (256 a second), with the race detector and other packages'
// tests running beside these, renewals waited for the lock past their
// deadline, sessions were lost, and the fleet did not balance within 30s
// (.ci/run, 2026-11-25); this tests fencing and takeover, not the file's
// throughput (store/sqlitestore's benchmarks measure that).
const (
	sqliteChildren   = 8
	sqlitePartitions = 64
	sqliteInterval   = time.Second
)

// TestProcessesSQLite runs the kill -9 and SIGSTOP tests of TestProcesses
// on members sharing one SQLite file (the sqlite:// store), with the same
// assertions, and a SIGSTOP that lands inside a write transaction.
func TestProcessesSQLite(t *testing.T) {
	if os.Getenv(envChild) == "1" {
		t.Skip("in a child process")
	}
	if testing.Short() {
		t.Skip("starts 8 OS processes per subtest and takes about 30s; skipped with -short")
	}
	t.Run("kill9", func(t *testing.T) {
		f, members := startSQLiteFleet(t, "kill9")
		checkKill9(t, f, members)
	})
	t.Run("sigstop", func(t *testing.T) {
		f, members := startSQLiteFleet(t, "sigstop")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		st, err := sqlitestore.Open(ctx, f.url)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		checkSigstop(t, f, members, st)
	})
	t.Run("sigstop-in-write", testSigstopInWrite)
}

// testSigstopInWrite stops a child inside a write transaction, holding the
// file's write lock, for 3 TTLs. Nobody can write: the other children
// cannot renew, fence themselves and stop their handlers, and nobody can
// claim anything, so no partition starts anywhere until the stopped child
// continues; then the fleet recovers, and no checkpoint goes backwards.
func testSigstopInWrite(t *testing.T) {
	f, members := startSQLiteFleet(t, "sigstop-in-write")
	victim := "c3"
	tries := 0
	for {
		f.signal(victim, syscall.SIGSTOP)
		f.waitStopped(victim)
		if slices.ContainsFunc(f.locksOf(victim), isWriteLock) {
			break
		}
		f.signal(victim, syscall.SIGCONT)
		if tries++; tries == 5000 {
			t.Fatalf("%s never held a write lock at 5000 stops", victim)
		}
		time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
	}
	stopAt := time.Now()
	f.mu.Lock()
	seq := len(f.events)
	old := f.claimsOfLocked(victim)
	f.mu.Unlock()
	t.Logf("%s stopped inside a write transaction after %d tries: %q", victim, tries, f.locksOf(victim))

	d := f.waitFor("the other children to stop their handlers", f.ttl+5*time.Second, func() (bool, string) {
		for p, rs := range f.running {
			for m := range rs {
				if m != victim {
					return false, fmt.Sprintf("%s still runs partition %s", m, p)
				}
			}
		}
		return true, ""
	})
	t.Logf("the other children fenced themselves and stopped every handler %v after the stop (TTL %v)", d.Round(time.Millisecond), f.ttl)
	if d := 3*f.ttl - time.Since(stopAt); d > 0 {
		time.Sleep(d)
	}
	for _, ev := range f.snapshotEvents()[seq:] {
		if ev.Ev == "start" && ev.T > stopAt.Add(time.Second).UnixNano() {
			t.Errorf("%s started partition %s (epoch %d) at %s, while %s held the write lock", ev.Member, ev.Partition, ev.Epoch, ts(ev.T), victim)
		}
	}
	contAt := time.Now()
	f.signal(victim, syscall.SIGCONT)
	d = f.waitBalanced("the fleet to recover after the stopped child continued", members, 1, 30*time.Second)
	t.Logf("after SIGCONT: balanced %v later: %v", d.Round(time.Millisecond), f.counts())

	// Every first start after SIGCONT begins at or after the last
	// checkpoint accepted before it (the stopped child's pending one
	// included: it commits when the child continues).
	evs := f.snapshotEvents()
	lastOK := map[string]uint64{}
	first := map[string]event{}
	for _, ev := range evs {
		switch {
		case ev.Ev == "cp_ok" && ev.Sent < contAt.UnixNano():
			lastOK[ev.Partition] = max(lastOK[ev.Partition], ev.Value)
		case ev.Ev == "start" && ev.T > contAt.UnixNano():
			if _, seen := first[ev.Partition]; !seen {
				first[ev.Partition] = ev
			}
		}
	}
	for p, ev := range first {
		if ev.Value < lastOK[p] {
			t.Errorf("partition %s: %s started from checkpoint %d after SIGCONT; %d was accepted before", p, ev.Member, ev.Value, lastOK[p])
		}
	}
	f.stopAll()
	f.checkExclusive(func(iv interval) bool {
		return iv.member == victim && old[iv.partition] == iv.epoch // frozen with the child
	})
}

// startSQLiteFleet starts the children on a new database file in a
// temporary directory and waits until they share the partitions evenly.
func startSQLiteFleet(t *testing.T, name string) (*fleet, []string) {
	t.Helper()
	url := "sqlite://" + filepath.Join(t.TempDir(), "herd.db")
	f := newFleet(t, "proctest-sqlite-"+name, "", sqlitePartitions, ttl)
	f.interval, f.url = sqliteInterval, url
	var members []string
	for i := range sqliteChildren {
		members = append(members, fmt.Sprintf("c%d", i))
	}
	for _, m := range members {
		f.start(m, url)
	}
	d := f.waitBalanced("the fleet to spread the partitions", members, 0, 30*time.Second)
	t.Logf("%d processes share %d partitions evenly %v after starting", sqliteChildren, sqlitePartitions, d.Round(time.Millisecond))
	return f, members
}
