package sqlitestore_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
)

// A database file removed, or replaced by another (mv), under Stores that
// use it: a Store opened after that works on the new file, and one opened
// before must not go on owning partitions in a file nobody else sees. Its
// next call finds the path naming another file and works on that one, as
// on a store that lost its data: its session is gone (KeepAlive fails with
// ErrSessionExpired) and its claim's checkpoints fail with ErrNotOwner, so
// that two members never both own p past the first Store's next renewal.
func TestFileReplaced(t *testing.T) {
	for _, how := range []string{"removed", "moved over"} {
		t.Run(how, func(t *testing.T) {
			ctx := t.Context()
			dir := t.TempDir()
			path := filepath.Join(dir, "herd.db")
			const ttl = 2 * time.Second
			s1 := open(t, path)
			sess1, err := s1.OpenSession(ctx, "g", "m1", 1, ttl)
			if err != nil {
				t.Fatal(err)
			}
			own1, err := store.Claim(ctx, s1, "g", "p", sess1)
			if err != nil {
				t.Fatal(err)
			}
			switch how {
			case "removed":
				for _, suffix := range []string{"", "-wal", "-shm", "-herd"} {
					if err := os.Remove(path + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
						t.Fatal(err)
					}
				}
			case "moved over":
				other := filepath.Join(dir, "other.db")
				o := open(t, other)
				if _, err := o.OpenSession(ctx, "g", "x", 1, ttl); err != nil {
					t.Fatal(err)
				}
				if err := o.Close(); err != nil {
					t.Fatal(err)
				}
				// The old file's -wal and -shm are removed too: SQLite
				// would pair them with the new file (docs/sqlite.md says so).
				if err := os.Rename(other, path); err != nil {
					t.Fatal(err)
				}
				for _, suffix := range []string{"-wal", "-shm"} {
					if err := os.Remove(path + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
						t.Fatal(err)
					}
				}
			}
			s2 := open(t, path)
			sess2, err := s2.OpenSession(ctx, "g", "m2", 1, ttl)
			if err != nil {
				t.Fatal(err)
			}
			own2, err := store.Claim(ctx, s2, "g", "p", sess2)
			if err != nil {
				t.Fatalf("Claim of p in the new file: %v", err)
			}

			// The first Store's next renewal finds its session gone.
			if _, err := s1.KeepAlive(ctx, "g", sess1, ttl); !errors.Is(err, store.ErrSessionExpired) {
				t.Errorf("KeepAlive of the first Store's session after its file was %s: %v; want ErrSessionExpired", how, err)
			}
			if err := s1.Checkpoint(ctx, "g", "p", own1.Epoch, []byte("stale")); !errors.Is(err, store.ErrNotOwner) {
				t.Errorf("Checkpoint by the first Store after its file was %s: %v; want ErrNotOwner", how, err)
			}
			// Both Stores now see one file: the second Store's claim, and
			// no session of the first.
			snap, err := s1.Snapshot(ctx, "g")
			if err != nil {
				t.Fatal(err)
			}
			if snap.Alive(sess1) || !snap.Alive(sess2) {
				t.Errorf("the first Store's snapshot: sessions %v; want %s alone", snap.Sessions, sess2)
			}
			if len(snap.Owners) != 1 || snap.Owners[0].Session != sess2 || snap.Owners[0].Epoch != own2.Epoch {
				t.Errorf("the first Store's snapshot: records %+v; want the second Store's claim of p (epoch %d)", snap.Owners, own2.Epoch)
			}
			if err := s2.Checkpoint(ctx, "g", "p", own2.Epoch, []byte("new")); err != nil {
				t.Errorf("Checkpoint by the new owner: %v", err)
			}
		})
	}
}
