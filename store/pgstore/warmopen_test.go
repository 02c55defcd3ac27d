package pgstore

import (
	"context"
	"testing"
	"time"
)

// TestOpenSessionWarmsUpOnce: a store's first OpenSession runs the
// session's function once first, in a group of its own and a transaction
// it rolls back (it takes a group number, and leaves no row), so the
// real call compiles nothing while it holds its group's lock; later calls
// do not run it again.
func TestOpenSessionWarmsUpOnce(t *testing.T) {
	s := openTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	gidOf := func(group string) int64 {
		t.Helper()
		var gid int64
		if err := s.pool.QueryRow(ctx, "SELECT gid FROM "+s.qschema+".groups WHERE name = $1", group).Scan(&gid); err != nil {
			t.Fatalf("gid of %s: %v", group, err)
		}
		return gid
	}
	var last int64 // the last group number taken (installing the schema warms up its connections)
	if err := s.pool.QueryRow(ctx, "SELECT coalesce(pg_sequence_last_value(pg_get_serial_sequence($1, 'gid')::regclass), 0)", s.qschema+".groups").Scan(&last); err != nil {
		t.Fatal(err)
	}
	if _, err := s.OpenSession(ctx, "first", "a", 1, tieTTL); err != nil {
		t.Fatal(err)
	}
	if got := gidOf("first"); got != last+2 {
		t.Errorf("the first group has number %d after %d; want %d (one taken by the warm-up, rolled back)", got, last, last+2)
	}
	if _, err := s.OpenSession(ctx, "second", "a", 1, tieTTL); err != nil {
		t.Fatal(err)
	}
	if got := gidOf("second"); got != last+3 {
		t.Errorf("the second group has number %d; want %d (no second warm-up)", got, last+3)
	}
	var groups, sessions int
	if err := s.pool.QueryRow(ctx, "SELECT (SELECT count(*) FROM "+s.qschema+".groups), (SELECT count(*) FROM "+s.qschema+".sessions)").Scan(&groups, &sessions); err != nil {
		t.Fatal(err)
	}
	if groups != 2 || sessions != 2 {
		t.Errorf("%d groups and %d sessions after two OpenSessions; want 2 and 2 (the warm-up leaves nothing)", groups, sessions)
	}
}

// TestWarmUpsDoNotQueue: a connection's warm-up does not wait for another
// warm-up still in its transaction. Each runs in a group of its own; with
// one group name for all, warm-ups of members connecting at once queued on
// its row, each holding it while the server compiled its functions. Here a
// transaction holds a session open in the name warm-ups once shared, and a
// warm-up must end well before its deadline.
func TestWarmUpsDoNotQueue(t *testing.T) {
	s := openTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	held, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = held.Rollback(ctx) }()
	var status string
	if err := held.QueryRow(ctx, s.q.open, "\x01herd warm-up", warmUpSession, "warm-up", int32(1), int64(60_000_000), int32(100)).Scan(&status); err != nil {
		t.Fatal(err)
	}
	// A new connection warms up (the pool's AfterConnect), then this one.
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	defer wcancel()
	c, err := s.pool.Acquire(wctx)
	if err != nil {
		t.Fatalf("a new connection: %v (its warm-up waited for another's transaction?)", err)
	}
	defer c.Release()
	if err := warmUp(s.q)(wctx, c.Conn()); err != nil {
		t.Fatal(err)
	}
	if wctx.Err() != nil {
		t.Fatalf("the warm-up waited %v for another warm-up's transaction: %v", 5*time.Second, wctx.Err())
	}
}
