package sqlitestore_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/sqlitestore"
)

// fileState is what a read-only open must leave as it was: the names in
// the directory, and the database file's bytes and modification time.
type fileState struct {
	names []string
	data  []byte
	mtime time.Time
}

func stateOf(t *testing.T, path string) fileState {
	t.Helper()
	ents, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	var st fileState
	for _, e := range ents {
		st.names = append(st.names, e.Name())
	}
	if st.data, err = os.ReadFile(path); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	st.mtime = fi.ModTime()
	return st
}

// A read-only Store on a read-only file no process has open reads the
// group, refuses writes, and creates and changes nothing: no -wal, -shm
// or sidecar file, the same bytes and modification time. (The tests run as
// root, whom permission bits do not stop: what is checked is that nothing
// was written, not that the kernel refused it.)
func TestReadOnlyWritesNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dir := t.TempDir()
	path := filepath.Join(dir, "herd.db")
	w, err := sqlitestore.Open(ctx, "sqlite://"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.SetPartitions(ctx, "g", store.PartitionSet{Partitions: []store.Partition{{ID: "a", Weight: 1}, {ID: "b", Weight: 1}}}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	os.Remove(path + "-herd") // as if the file were copied here alone
	if err := os.Chmod(path, 0o444); err != nil {
		t.Fatal(err)
	}
	before := stateOf(t, path)

	r, err := sqlitestore.Open(ctx, "sqlite://"+path, sqlitestore.WithReadOnly())
	if err != nil {
		t.Fatalf("read-only Open: %v", err)
	}
	snap, err := r.Snapshot(ctx, "g")
	if err != nil || len(snap.Partitions) != 2 {
		t.Fatalf("Snapshot: %v, %v", snap.Partitions, err)
	}
	if gs, err := r.Groups(ctx); err != nil || !slices.Equal(gs, []string{"g"}) {
		t.Fatalf("Groups: %v, %v", gs, err)
	}
	if _, err := r.SetPartitions(ctx, "g", store.PartitionSet{}); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("SetPartitions on a read-only Store: %v; want store.ErrUnavailable", err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	after := stateOf(t, path)
	if !slices.Equal(before.names, after.names) {
		t.Errorf("files before %v, after %v; want none created", before.names, after.names)
	}
	if !bytes.Equal(before.data, after.data) || !before.mtime.Equal(after.mtime) {
		t.Errorf("the database file changed (mtime %v -> %v)", before.mtime, after.mtime)
	}

	// A file that does not exist is not created.
	missing := filepath.Join(dir, "nothere.db")
	_, err = sqlitestore.Open(ctx, "sqlite://"+missing, sqlitestore.WithReadOnly())
	if !errors.Is(err, fs.ErrNotExist) || !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("read-only Open of a missing file: %v; want fs.ErrNotExist and store.ErrUnavailable", err)
	}
	if names := stateOf(t, path).names; !slices.Equal(names, before.names) {
		t.Errorf("files after opening a missing file read-only: %v; want %v", names, before.names)
	}
}

// A read-only Store on a file that members have open reads through their
// WAL: it sees commits made after it opened, and writes nothing itself.
func TestReadOnlySeesLiveWrites(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	path := filepath.Join(t.TempDir(), "herd.db")
	w := open(t, path)
	if _, err := w.SetPartitions(ctx, "g", store.PartitionSet{Partitions: []store.Partition{{ID: "a", Weight: 1}}}); err != nil {
		t.Fatal(err)
	}
	r := open(t, path, sqlitestore.WithReadOnly())
	if _, err := w.SetPartitions(ctx, "g", store.PartitionSet{Partitions: []store.Partition{{ID: "a", Weight: 1}, {ID: "b", Weight: 1}}}); err != nil {
		t.Fatal(err)
	}
	snap, err := r.Snapshot(ctx, "g")
	if err != nil || len(snap.Partitions) != 2 {
		t.Fatalf("Snapshot after a later commit: %v, %v; want 2 partitions", snap.Partitions, err)
	}
	if _, err := r.OpenSession(ctx, "g", "m", 1, time.Second); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("OpenSession on a read-only Store: %v; want store.ErrUnavailable", err)
	}
}
