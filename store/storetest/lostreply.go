package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
)

// RunLostOpenReply checks that a session opened by an OpenSession whose
// reply was lost (the server ran it; the call failed on its deadline) is
// closed by the next OpenSession of the group: before store.Ghosts it lived
// a TTL with nobody renewing it, and the other members handed partitions
// to it. s reaches its server through a proxy whose replies hold(true)
// holds and hold(false) lets through again. The group is deleted at the
// end.
func RunLostOpenReply(t *testing.T, s store.Store, hold func(bool)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	const group = "lost-reply"
	// The first open also readies the connection (a prepared statement,
	// a script loaded), so that the one below sends its request whole:
	// its reply is the only one held.
	other, err := s.OpenSession(ctx, group, "m0", 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	hold(true)
	octx, ocancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = s.OpenSession(octx, group, "m1", 1, time.Minute)
	ocancel()
	hold(false)
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("OpenSession whose reply is held: %v; want store.ErrUnavailable", err)
	}
	for deadline := time.Now().Add(10 * time.Second); len(liveSessions(t, s, group)) != 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the server did not open the session whose reply was lost within 10s")
		}
	}
	id, err := s.OpenSession(ctx, group, "m1", 1, time.Minute)
	if err != nil {
		t.Fatalf("OpenSession after the reply was lost: %v", err)
	}
	WantSessions(t, s, group, other, id)
	if err := s.DeleteGroup(ctx, group, true); err != nil {
		t.Fatal(err)
	}
}

// WantSessions checks that the group's live sessions are ids (in any
// order): none missing, none other (opened by a call that failed).
func WantSessions(t *testing.T, s store.Store, group string, ids ...string) {
	t.Helper()
	live := liveSessions(t, s, group)
	for _, id := range ids {
		if !live[id] {
			t.Errorf("session %s is not alive", id)
		}
		delete(live, id)
	}
	for id := range live {
		t.Errorf("session %s is alive, opened by a call that failed", id)
	}
}

// liveSessions is the set of group's live sessions, read with Snapshot.
func liveSessions(t *testing.T, s store.Store, group string) map[string]bool {
	t.Helper()
	snap, err := s.Snapshot(t.Context(), group)
	if err != nil {
		t.Fatal(err)
	}
	live := map[string]bool{}
	for _, si := range snap.Sessions {
		live[si.ID] = true
	}
	return live
}
