package pgstore

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/herdhq/herd/internal/pgtest"
	"github.com/herdhq/herd/store"
)

const (
	tieTTL   = 10 * time.Second
	tieGrace = 250 * time.Millisecond
)

// tied opens a session of member in group and ties it; cuts receives
// what the tie's Cut reports.
func tied(ctx context.Context, t *testing.T, s *Store, group, member string, cuts chan time.Duration) (string, store.Tie) {
	t.Helper()
	id, err := s.OpenSession(ctx, group, member, 1, tieTTL)
	if err != nil {
		t.Fatal(err)
	}
	cfg := store.TieConfig{TTL: tieTTL, Grace: tieGrace}
	if cuts != nil {
		cfg.Cut = func(d time.Duration) {
			select {
			case cuts <- d:
			default:
			}
		}
	}
	tie, err := s.TieSession(ctx, group, id, cfg)
	if err != nil {
		t.Fatalf("TieSession: %v", err)
	}
	t.Cleanup(func() { _ = tie.Close() })
	return id, tie
}

// liveSessions lists the group's live sessions.
func liveSessions(ctx context.Context, t *testing.T, s *Store, group string) []string {
	t.Helper()
	snap, err := s.Snapshot(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, ss := range snap.Sessions {
		ids = append(ids, ss.ID)
	}
	return ids
}

// waitLive calls ExpireSessions until the group's live sessions are
// want, for up to within.
func waitLive(ctx context.Context, t *testing.T, s *Store, group string, want []string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if _, err := s.ExpireSessions(ctx, group); err != nil {
			t.Fatal(err)
		}
		live := liveSessions(ctx, t, s, group)
		if slices.Equal(live, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("live sessions: %v; want %v", live, want)
		}
		time.Sleep(5 * time.Millisecond) // polling the store's clock
	}
}

// The server ends a tied connection (pg_terminate_backend): its tie is
// lost at once; the session that watches it is told to expire sessions
// after about the grace; the session stays alive (no claim of its
// partition succeeds) until then, and ExpireSessions then ends it.
func TestTieTerminatedEndsSessionAfterGrace(t *testing.T) {
	s := openTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const group = "tie-terminate"
	cuts := make(chan time.Duration, 4)
	a, tieA := tied(ctx, t, s, group, "a", nil)
	b, _ := tied(ctx, t, s, group, "b", cuts)
	if _, err := store.Claim(ctx, s, group, "p", a); err != nil {
		t.Fatal(err)
	}

	killed := time.Now()
	if n := pgtest.Count(t, "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1) x", tieAppPrefix+a); n != 1 {
		t.Fatalf("terminated %d backends of the tie of %s; want 1", n, a)
	}
	select {
	case <-tieA.Lost():
		t.Logf("tie of a lost %v after pg_terminate_backend: %v", time.Since(killed).Round(time.Microsecond), tieA.Err())
	case <-time.After(5 * time.Second):
		t.Fatal("the tie of a was not lost within 5s of pg_terminate_backend")
	}
	if !errors.Is(tieA.Err(), store.ErrUnavailable) {
		t.Errorf("Err = %v; want store.ErrUnavailable", tieA.Err())
	}
	var d time.Duration
	select {
	case d = <-cuts:
	case <-time.After(5 * time.Second):
		t.Fatal("b's tie reported no cut within 5s")
	}
	if d <= 0 || d > tieGrace {
		t.Errorf("cut reported %v to wait; want in (0, %v]", d, tieGrace)
	}
	// Before the grace has passed, a's record is still a's.
	if _, err := store.Claim(ctx, s, group, "p", b); !errors.Is(err, store.ErrClaimed) && time.Since(killed) < tieGrace {
		t.Errorf("b claimed a's partition %v after the cut, within the grace: %v", time.Since(killed), err)
	}
	waitLive(ctx, t, s, group, []string{b}, time.Until(killed.Add(d+2*time.Second)))
	if _, err := store.Claim(ctx, s, group, "p", b); err != nil {
		t.Fatalf("b could not claim a's partition after a's session ended: %v", err)
	}
	t.Logf("a's session ended and its partition was claimed %v after pg_terminate_backend (grace %v)", time.Since(killed).Round(time.Millisecond), tieGrace)
}

// A renewal after the cut does not save the session: ExpireSessions caps
// its expiry again and ends it.
func TestTieKeepAliveAfterCut(t *testing.T) {
	s := openTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const group = "tie-renewed"
	cuts := make(chan time.Duration, 4)
	a, tieA := tied(ctx, t, s, group, "a", nil)
	b, _ := tied(ctx, t, s, group, "b", cuts)
	_ = tieA.Close() // the same as a dead process, for the store
	d := <-cuts
	if _, err := s.KeepAlive(ctx, group, a, tieTTL); err != nil {
		t.Fatalf("KeepAlive of a right after the cut: %v", err)
	}
	waitLive(ctx, t, s, group, []string{b}, d+2*time.Second)
	if _, err := s.KeepAlive(ctx, group, a, tieTTL); !errors.Is(err, store.ErrSessionExpired) {
		t.Fatalf("KeepAlive of a after its end: %v; want ErrSessionExpired", err)
	}
}

// Tied members that live and stay connected keep their sessions: over
// several watch rounds no tie is lost, none cut, no session ends.
func TestTieLiveMembersKeepSessions(t *testing.T) {
	s := openTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const group = "tie-live"
	cuts := make(chan time.Duration, 4)
	var ties []store.Tie
	var ids []string
	for _, m := range []string{"a", "b", "c"} {
		id, tie := tied(ctx, t, s, group, m, cuts)
		ids, ties = append(ids, id), append(ties, tie)
	}
	slices.Sort(ids)
	end := time.After(watchWait + watchWait/2)
	for done := false; !done; {
		select {
		case d := <-cuts:
			t.Fatalf("a cut was reported (%v) while every member lives", d)
		case <-end:
			done = true
		}
		for i, tie := range ties {
			select {
			case <-tie.Lost():
				t.Fatalf("tie %d lost: %v", i, tie.Err())
			default:
			}
		}
	}
	if _, err := s.ExpireSessions(ctx, group); err != nil {
		t.Fatal(err)
	}
	if live := liveSessions(ctx, t, s, group); !slices.Equal(live, ids) {
		t.Fatalf("live sessions: %v; want %v", live, ids)
	}
}

// TieSession refuses a session that is not alive, and bad timings.
func TestTieSessionRefuses(t *testing.T) {
	s := openTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := s.TieSession(ctx, "tie-refuse", "nosuch", store.TieConfig{TTL: tieTTL, Grace: tieGrace}); !errors.Is(err, store.ErrSessionExpired) {
		t.Errorf("TieSession of an unknown session: %v; want ErrSessionExpired", err)
	}
	if _, err := s.TieSession(ctx, "tie-refuse", "x", store.TieConfig{TTL: tieTTL, Grace: tieTTL}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("TieSession with grace = TTL: %v; want ErrInvalid", err)
	}
}
