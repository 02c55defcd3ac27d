package proctest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/herdhq/herd/store/sqlitestore"
)

// TestProcessesSQLiteFileReplaced removes the database file (or moves
// another herd database over it) while a member process runs partition 0
// in it, then starts a second member on the same path, which creates (or
// opens) the new file and may claim 0 there. The first member must notice
// that its path names another file and stop its handler within the TTL, as
// after a store that lost its data; the two never run partition 0 together
// longer than that. (Before, the first went on renewing, claiming and
// checkpointing in the unlinked file: both ran 0 until stopped.)
func TestProcessesSQLiteFileReplaced(t *testing.T) {
	if os.Getenv(envChild) == "1" {
		t.Skip("in a child process")
	}
	for _, how := range []string{"removed", "moved over"} {
		t.Run(how, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "herd.db")
			url := "sqlite://" + path
			f := newFleet(t, "proctest-sqlite-replaced", "", 1, ttl)
			// No checkpoints: each would find the file replaced at once;
			// the member must notice by itself (renewals, the poll).
			f.url, f.interval = url, time.Hour
			f.start("a", url)
			f.waitFor("a to run partition 0", 30*time.Second, func() (bool, string) {
				_, ok := f.running["0"]["a"]
				return ok, fmt.Sprint(f.running)
			})
			f.mu.Lock()
			old := f.running["0"]["a"].epoch
			f.mu.Unlock()
			replaceFile(t, path, how)
			f.start("b", url)
			// a may notice before b has started (then a creates the new
			// file, holds as after a data loss, and runs 0 there), or
			// after b claimed 0 in the new file.
			d := f.waitFor("a to stop its run of partition 0 in the old file", 2*ttl, func() (bool, string) {
				r, ok := f.running["0"]["a"]
				return !ok || r.epoch != old, fmt.Sprint(f.running)
			})
			t.Logf("a stopped its run of partition 0 in the old file %v after it was %s", d.Round(time.Millisecond), how)
			f.waitFor("partition 0 to run in the new file", 30*time.Second, func() (bool, string) {
				rs := f.running["0"]
				for _, r := range rs {
					return len(rs) == 1 && r.epoch != old, fmt.Sprint(rs)
				}
				return false, "nobody runs 0"
			})
			f.stopAll()

			// a's run in the old file may overlap b's by less than the
			// TTL; nothing else may overlap at all.
			ivs := f.intervals()["0"]
			if len(ivs) < 2 || ivs[0].member != "a" || ivs[0].epoch != old {
				t.Fatalf("runs of partition 0: %+v; want a's at epoch %d first", ivs, old)
			}
			first := ivs[0]
			for _, iv := range ivs[1:] {
				if iv.start < first.end {
					overlap := time.Duration(first.end - iv.start)
					t.Logf("a (epoch %d, old file) and %s (epoch %d) both ran partition 0 for %v", first.epoch, iv.member, iv.epoch, overlap.Round(time.Millisecond))
					if overlap >= ttl {
						t.Errorf("a and %s both ran partition 0 for %v; want less than the TTL %v", iv.member, overlap, ttl)
					}
				}
			}
			f.checkExclusive(func(iv interval) bool { return iv.claimKey == first.claimKey })
		})
	}
}

// replaceFile removes the database at path with its -wal, -shm and -herd,
// or moves another herd database over it (removing the -wal and -shm
// that belong to the old one).
func replaceFile(t *testing.T, path, how string) {
	t.Helper()
	remove := func(suffixes ...string) {
		for _, s := range suffixes {
			if err := os.Remove(path + s); err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Fatal(err)
			}
		}
	}
	switch how {
	case "removed":
		remove("", "-wal", "-shm", "-herd")
	case "moved over":
		other := filepath.Join(filepath.Dir(path), "other.db")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		st, err := sqlitestore.Open(ctx, "sqlite://"+other)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		os.Remove(other + "-herd")
		if err := os.Rename(other, path); err != nil {
			t.Fatal(err)
		}
		remove("-wal", "-shm")
	}
}
