package pgstore

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/herdhq/herd/internal/valve"
	"github.com/herdhq/herd/store"
)

// openThrough opens a store on a schema of its own whose connections go to
// host (host:port) instead of the test server; closed when the test ends.
func openThrough(t *testing.T, host string, opts ...Option) *Store {
	t.Helper()
	u, err := url.Parse(testURL())
	if err != nil {
		t.Fatal(err)
	}
	u.Host = host
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	s, err := Open(ctx, withOptions(u.String(), "schema", newSchema(t)), opts...)
	if err != nil {
		t.Fatalf("Open through %s: %v", host, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// A session opened by a call whose reply was lost (the server ran it) is
// closed by the next OpenSession of the group: before, it lived a TTL with
// nobody renewing it, and the other members handed partitions to it.
func TestOpenSessionClosesASessionWhoseReplyWasLost(t *testing.T) {
	requireServer(t)
	u, err := url.Parse(testURL())
	if err != nil {
		t.Fatal(err)
	}
	proxy := valve.New(t, u.Host)
	s := openThrough(t, proxy.Addr)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	const group = "lost-reply"
	// The first open also prepares the statement on the connection, so
	// that the one below sends it whole: its reply is the only one held.
	other, err := s.OpenSession(ctx, group, "m0", 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}

	proxy.Set(true) // the server's replies are held
	octx, ocancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = s.OpenSession(octx, group, "m1", 1, time.Minute)
	ocancel()
	proxy.Set(false)
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("OpenSession whose reply is held: %v; want store.ErrUnavailable", err)
	}
	waitFor(t, 10*time.Second, "the server to have opened the session whose reply was lost", func() bool {
		snap, err := s.Snapshot(ctx, group)
		return err == nil && len(snap.Sessions) == 2
	})
	id, err := s.OpenSession(ctx, group, "m1", 1, time.Minute)
	if err != nil {
		t.Fatalf("OpenSession after the reply was lost: %v", err)
	}
	wantSessions(t, s, group, other, id)
}

// wantSessions checks that the group's live sessions are ids (in any order).
func wantSessions(t *testing.T, s *Store, group string, ids ...string) {
	t.Helper()
	snap, err := s.Snapshot(t.Context(), group)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, si := range snap.Sessions {
		got[si.ID] = true
	}
	for _, id := range ids {
		if !got[id] {
			t.Errorf("session %s is not alive", id)
		}
		delete(got, id)
	}
	for id := range got {
		t.Errorf("session %s is alive, opened by a call that failed", id)
	}
}
