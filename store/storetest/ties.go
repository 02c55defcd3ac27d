package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
)

// Version is the group's version now, read with Snapshot.
func Version(ctx context.Context, t *testing.T, s store.Store, group string) store.Version {
	t.Helper()
	snap, err := s.Snapshot(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	return snap.Version
}

// WaitExpired follows the group's log from v until it shows session's
// expiry, for up to within, and returns when it read it (the tests of
// ties call nothing that expires sessions: the ties do).
func WaitExpired(ctx context.Context, t *testing.T, s store.Store, group string, v store.Version, session string, within time.Duration) time.Time {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for {
		cs, next, err := s.Changes(wctx, group, v, 100)
		if err != nil || wctx.Err() != nil {
			t.Fatalf("no expiry of session %s in the log within %v (%v)", session, within, err)
		}
		for _, c := range cs {
			if c.Kind == store.SessionExpired && c.Session == session {
				return time.Now()
			}
		}
		v = next
	}
}

// TiedStore is a store that can tie sessions.
type TiedStore interface {
	store.Store
	store.ConnTied
}

// Tied opens a session of member in group, ties it with cfg, and closes
// the tie when the test ends.
func Tied(ctx context.Context, t *testing.T, s TiedStore, group, member string, cfg store.TieConfig) (string, store.Tie) {
	t.Helper()
	id, err := s.OpenSession(ctx, group, member, 1, cfg.TTL)
	if err != nil {
		t.Fatal(err)
	}
	tie, err := s.TieSession(ctx, group, id, cfg)
	if err != nil {
		t.Fatalf("TieSession: %v", err)
	}
	t.Cleanup(func() { _ = tie.Close() })
	return id, tie
}
