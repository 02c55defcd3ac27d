package pgstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/herdhq/herd/internal/pgtest"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/storetest"
)

const (
	tieTTL   = 10 * time.Second
	tieGrace = 250 * time.Millisecond
)

// tied opens a session of member in group and ties it.
func tied(ctx context.Context, t *testing.T, s *Store, group, member string) (string, store.Tie) {
	t.Helper()
	return storetest.Tied(ctx, t, s, group, member, store.TieConfig{TTL: tieTTL, Grace: tieGrace})
}

// The server ends a tied connection (pg_terminate_backend): its tie is
// lost at once; the session stays alive (no claim of its partition
// succeeds) for the grace, and is then ended, logged, by the tie that
// watches it, without anyone calling ExpireSessions.
func TestTieTerminatedEndsSessionAfterGrace(t *testing.T) {
	s := openTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const group = "tie-terminate"
	a, tieA := tied(ctx, t, s, group, "a")
	b, _ := tied(ctx, t, s, group, "b")
	if _, err := store.Claim(ctx, s, group, "p", a); err != nil {
		t.Fatal(err)
	}
	v := storetest.Version(ctx, t, s, group)

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
	_, err := store.Claim(ctx, s, group, "p", b)
	if early := time.Since(killed) < tieGrace; early && !errors.Is(err, store.ErrClaimed) {
		t.Errorf("b's claim of a's partition, within the grace of the cut: %v; want ErrClaimed", err)
	}
	ended := storetest.WaitExpired(ctx, t, s, group, v, a, 5*time.Second).Sub(killed)
	if ended < tieGrace {
		t.Errorf("a's session ended %v after pg_terminate_backend; want no sooner than the grace %v", ended, tieGrace)
	}
	if _, err := store.Claim(ctx, s, group, "p", b); err != nil {
		t.Fatalf("b could not claim a's partition after a's session ended: %v", err)
	}
	t.Logf("a's session ended %v after pg_terminate_backend (grace %v)", ended.Round(time.Millisecond), tieGrace)
}

// A renewal after the cut does not save the session: the tie that saw
// the cut caps its expiry again and ends it.
func TestTieKeepAliveAfterCut(t *testing.T) {
	s := openTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const group = "tie-renewed"
	a, tieA := tied(ctx, t, s, group, "a")
	tied(ctx, t, s, group, "b")
	v := storetest.Version(ctx, t, s, group)
	_ = tieA.Close() // the same as a dead process, for the store
	deadline := time.Now().Add(5 * time.Second)
	for pgtest.Count(t, "SELECT count(*) FROM "+s.qschema+".ties WHERE id = $1 AND cut IS NOT NULL", a) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("a's tie was not cut within 5s of its Close")
		}
		time.Sleep(time.Millisecond) // polling the table
	}
	if _, err := s.KeepAlive(ctx, group, a, tieTTL); err != nil {
		t.Fatalf("KeepAlive of a right after the cut: %v", err)
	}
	storetest.WaitExpired(ctx, t, s, group, v, a, 5*time.Second)
	if _, err := s.KeepAlive(ctx, group, a, tieTTL); !errors.Is(err, store.ErrSessionExpired) {
		t.Fatalf("KeepAlive of a after its end: %v; want ErrSessionExpired", err)
	}
}

// Tied members that live and stay connected keep their sessions: over
// more than one watch round nothing is logged and no tie is lost.
func TestTieLiveMembersKeepSessions(t *testing.T) {
	s := openTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const group = "tie-live"
	var ties []store.Tie
	for _, m := range []string{"a", "b", "c"} {
		_, tie := tied(ctx, t, s, group, m)
		ties = append(ties, tie)
	}
	v := storetest.Version(ctx, t, s, group)
	wctx, wcancel := context.WithTimeout(ctx, watchBeat+watchBeat/2)
	defer wcancel()
	for wctx.Err() == nil {
		cs, next, err := s.Changes(wctx, group, v, 100)
		if err != nil && wctx.Err() == nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			t.Errorf("logged while every tied member lives: %v %s", c.Kind, c.Session)
		}
		v = next
	}
	for i, tie := range ties {
		if err := tie.Err(); err != nil {
			t.Errorf("tie %d lost: %v", i, err)
		}
	}
	if n := pgtest.Count(t, "SELECT count(*) FROM "+s.qschema+".ties WHERE cut IS NOT NULL"); n != 0 {
		t.Errorf("%d ties cut while every member lives", n)
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
