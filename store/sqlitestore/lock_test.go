package sqlitestore_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/sqlitestore"
)

// A write transaction of another connection (another process) holds the
// file's write lock: writes wait for it, up to their context's deadline
// or the busy timeout, and fail with ErrUnavailable saying so; reads do
// not wait; once the lock is released, writes go on.
func TestWriteLockHeld(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "herd.db")
	s := open(t, path, sqlitestore.WithBusyTimeout(300*time.Millisecond))
	sess, err := s.OpenSession(ctx, "g", "m", 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	db := rawDB(t, path)
	holder, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	exec := func(q string) {
		if _, err := holder.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec("BEGIN IMMEDIATE")

	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, err = s.KeepAlive(short, "g", sess, time.Minute)
	cancel()
	if !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("KeepAlive while another connection holds the write lock, 100ms deadline: %v; want ErrUnavailable", err)
	}
	_, err = s.KeepAlive(ctx, "g", sess, time.Minute) // no deadline: the busy timeout
	if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "held the database's write lock") {
		t.Errorf("KeepAlive past the busy timeout: %v; want ErrUnavailable naming the write lock", err)
	}
	if snap, err := s.Snapshot(ctx, "g"); err != nil || !snap.Alive(sess) {
		t.Errorf("Snapshot while the write lock is held: %v; want it read without waiting", err)
	}
	exec("ROLLBACK")
	if _, err := s.KeepAlive(ctx, "g", sess, time.Minute); err != nil {
		t.Errorf("KeepAlive after the lock was released: %v", err)
	}
}

// A write that gives up waiting for another Store's write (its context
// ended) leaves nothing behind: once the other write ends, writes of both
// Stores go on.
func TestWriteWaitAbandoned(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "herd.db")
	a := open(t, path)
	b := open(t, path)
	sa, _ := a.OpenSession(ctx, "g", "a", 1, time.Minute)
	sb, _ := b.OpenSession(ctx, "g", "b", 1, time.Minute)
	// A holds the write lock for as long as one big SetPartitions takes,
	// while B gives up waiting many times.
	ps := make([]store.Partition, 20_000)
	for i := range ps {
		ps[i] = store.Partition{ID: fmt.Sprint(i)}
	}
	done := make(chan error, 1)
	go func() { _, err := a.SetPartitions(ctx, "g", store.PartitionSet{Partitions: ps}); done <- err }()
	gaveUp := 0
	for running := true; running; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			running = false
		default:
			short, cancel := context.WithTimeout(ctx, time.Millisecond)
			if _, err := b.KeepAlive(short, "g", sb, time.Minute); errors.Is(err, store.ErrUnavailable) {
				gaveUp++
			}
			cancel()
		}
	}
	t.Logf("B gave up waiting %d times", gaveUp)
	for _, s := range []struct {
		st   *sqlitestore.Store
		sess string
	}{{a, sa}, {b, sb}, {a, sa}} {
		short, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := s.st.KeepAlive(short, "g", s.sess, time.Minute)
		cancel()
		if err != nil {
			t.Fatalf("KeepAlive after the long write ended: %v; want it to go on", err)
		}
	}
}

// Close while writes are under way waits for them to release the
// sidecar's flock before it closes the sidecar (the race detector saw
// Close closing it under a renewal's unlock); every write either lands
// or fails with ErrUnavailable.
func TestCloseWaitsForWritesInFlight(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "herd.db")
	for round := range 20 {
		s, err := sqlitestore.Open(ctx, "sqlite://"+path)
		if err != nil {
			t.Fatal(err)
		}
		sess, err := s.OpenSession(ctx, "g", "m", 1, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		errs := make(chan error, 4)
		for range cap(errs) {
			go func() {
				var err error
				for err == nil {
					_, err = s.KeepAlive(ctx, "g", sess, time.Minute)
				}
				errs <- err
			}()
		}
		if err := s.Close(); err != nil {
			t.Fatalf("round %d: Close: %v", round, err)
		}
		for range cap(errs) {
			if err := <-errs; !errors.Is(err, store.ErrUnavailable) {
				t.Errorf("round %d: KeepAlive during Close: %v; want ErrUnavailable", round, err)
			}
		}
	}
}
