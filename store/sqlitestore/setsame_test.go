package sqlitestore_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
)

// Setting the set a group holds already takes no write lock: while
// another connection (another process) holds it, SetPartitions of the
// same set answers Same at once, as every member of a fleet starting
// together sets the one set; a different set still waits for the lock.
func TestSetSamePartitionsTakesNoWriteLock(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "herd.db")
	s := open(t, path)
	set := store.PartitionSet{Kind: store.KindPartitions, Partitions: []store.Partition{{ID: "a"}, {ID: "b"}}}
	if _, err := s.SetPartitions(ctx, "g", set); err != nil {
		t.Fatal(err)
	}
	holder, err := rawDB(t, path).Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if _, err := holder.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	defer holder.ExecContext(context.Background(), "ROLLBACK")

	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	res, err := s.SetPartitions(short, "g", set)
	cancel()
	if err != nil || !res.Same || res.Written || res.Kind != store.KindPartitions {
		t.Errorf("SetPartitions of the stored set while another connection holds the write lock: %+v, %v; want Same, not written, at once", res, err)
	}
	other := store.PartitionSet{Kind: store.KindPartitions, Partitions: []store.Partition{{ID: "c"}}}
	short, cancel = context.WithTimeout(ctx, 100*time.Millisecond)
	_, err = s.SetPartitions(short, "g", other)
	cancel()
	if !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("SetPartitions of another set while the write lock is held: %v; want ErrUnavailable (it waits for the lock)", err)
	}
}
