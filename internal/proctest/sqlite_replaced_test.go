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
// opens) the new file and claims 0. The first member must notice that its
// path names another file and stop its handler within the TTL, as after a
// store that lost its data; the two never run partition 0 together longer
// than that. (Before, the first went on renewing, claiming and
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
			replaceFile(t, path, how)
			f.start("b", url)
			f.waitFor("b to run partition 0", 30*time.Second, func() (bool, string) {
				_, ok := f.running["0"]["b"]
				return ok, fmt.Sprint(f.running)
			})
			d := f.waitFor("a to stop partition 0", 2*ttl, func() (bool, string) {
				_, ok := f.running["0"]["a"]
				return !ok, fmt.Sprint(f.running)
			})
			t.Logf("a stopped partition 0 %v after b started it", d.Round(time.Millisecond))
			f.stopAll()

			// a's first run (the one in the old file) may overlap b's by
			// less than the TTL; nothing else may overlap at all.
			ivs := f.intervals()["0"]
			if len(ivs) < 2 || ivs[0].member != "a" {
				t.Fatalf("runs of partition 0: %+v; want a's first", ivs)
			}
			first := ivs[0]
			for _, iv := range ivs[1:] {
				if iv.member == "b" && iv.start < first.end {
					overlap := time.Duration(first.end - iv.start)
					t.Logf("a (epoch %d, old file) and b (epoch %d) both ran partition 0 for %v", first.epoch, iv.epoch, overlap.Round(time.Millisecond))
					if overlap >= ttl {
						t.Errorf("a and b both ran partition 0 for %v; want less than the TTL %v", overlap, ttl)
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
