package proctest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/herdhq/herd/store/sqlitestore"
)

// The SQLite fleet: 8 processes on one database file, 64 partitions, a
// checkpoint every 250ms per partition (256 commits a second, each synced
// to disk), the same 2s TTL.
const (
	sqliteChildren   = 8
	sqlitePartitions = 64
	sqliteInterval   = 250 * time.Millisecond
)

// TestProcessesSQLite runs the kill -9 and SIGSTOP tests of TestProcesses
// on members sharing one SQLite file (the sqlite:// store), with the same
// assertions.
func TestProcessesSQLite(t *testing.T) {
	if os.Getenv(envChild) == "1" {
		t.Skip("in a child process")
	}
	if testing.Short() {
		t.Skip("starts 8 OS processes per subtest and takes about 20s; skipped with -short")
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
