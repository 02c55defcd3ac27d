package sqlitestore_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/sqlitestore"
	"github.com/herdhq/herd/store/storetest"
)

const (
	tieTTL   = 10 * time.Second
	tieGrace = 200 * time.Millisecond
)

// tied opens a session of member in group and ties it.
func tied(ctx context.Context, t *testing.T, s *sqlitestore.Store, group, member string) (string, store.Tie) {
	t.Helper()
	return storetest.Tied(ctx, t, s, group, member, store.TieConfig{TTL: tieTTL, Grace: tieGrace})
}

// A tie closed (for the store, what a process's death does: its lock is
// released) ends its session after the grace, logged by the tie that
// watches it, without anyone calling ExpireSessions; the session's
// partition cannot be claimed before.
func TestTieReleasedEndsSessionAfterGrace(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "herd.db")
	sa, sb := open(t, path), open(t, path)
	const group = "g"
	a, tieA := tied(ctx, t, sa, group, "a")
	b, _ := tied(ctx, t, sb, group, "b")
	if _, err := store.Claim(ctx, sa, group, "p", a); err != nil {
		t.Fatal(err)
	}
	v := storetest.Version(ctx, t, sb, group)
	at := time.Now()
	_ = tieA.Close()
	_, err := store.Claim(ctx, sb, group, "p", b)
	if time.Since(at) < tieGrace && !errors.Is(err, store.ErrClaimed) {
		t.Errorf("b's claim of a's partition within the grace: %v; want ErrClaimed", err)
	}
	ended := storetest.WaitExpired(ctx, t, sb, group, v, a, 5*time.Second).Sub(at)
	if ended < tieGrace {
		t.Errorf("a's session ended %v after its lock was released; want no sooner than the grace %v", ended, tieGrace)
	}
	if _, err := store.Claim(ctx, sb, group, "p", b); err != nil {
		t.Fatalf("b could not claim a's partition after a's session ended: %v", err)
	}
	t.Logf("a's session ended %v after its lock was released (grace %v)", ended.Round(time.Millisecond), tieGrace)
}

// A tie nobody watches (the only one of its group) is cut by
// ExpireSessions, which ends its session once the grace has passed.
func TestTieExpireSessionsCuts(t *testing.T) {
	ctx := t.Context()
	s := open(t, filepath.Join(t.TempDir(), "herd.db"))
	a, tieA := tied(ctx, t, s, "g", "a")
	if next, err := s.ExpireSessions(ctx, "g"); err != nil || next <= tieGrace {
		t.Fatalf("ExpireSessions while a's lock is held: next %v, %v; want above the grace", next, err)
	}
	_ = tieA.Close()
	next, err := s.ExpireSessions(ctx, "g")
	if err != nil || next > tieGrace {
		t.Fatalf("ExpireSessions after a's lock was released: next %v, %v; want at most the grace %v", next, err, tieGrace)
	}
	time.Sleep(next) // the time ExpireSessions said
	if _, err := s.ExpireSessions(ctx, "g"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.KeepAlive(ctx, "g", a, tieTTL); !errors.Is(err, store.ErrSessionExpired) {
		t.Fatalf("KeepAlive of a after its grace: %v; want ErrSessionExpired", err)
	}
	if _, err := os.Stat(filepath.Join(s.Path()+"-herd-ties", a)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a's lock file after its session ended: %v; want it removed", err)
	}
}

// A renewal after the cut does not save the session.
func TestTieKeepAliveAfterCut(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "herd.db")
	sa, sb := open(t, path), open(t, path)
	a, tieA := tied(ctx, t, sa, "g", "a")
	tied(ctx, t, sb, "g", "b")
	v := storetest.Version(ctx, t, sb, "g")
	_ = tieA.Close()
	next, err := sb.ExpireSessions(ctx, "g") // cut now, if b's watch did not
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sa.KeepAlive(ctx, "g", a, tieTTL); err != nil {
		t.Fatalf("KeepAlive of a right after the cut: %v", err)
	}
	// As a member does, call again when the store says the next session
	// is due: b's watch ends a's session after the grace only if it saw
	// the cut itself, which it may not have if it was not yet waiting on
	// a's lock when a released it.
	again := time.AfterFunc(next, func() { _, _ = sb.ExpireSessions(ctx, "g") })
	defer again.Stop()
	storetest.WaitExpired(ctx, t, sb, "g", v, a, 5*time.Second)
}

// Tied members that live keep their sessions: ExpireSessions, called
// over and over, cuts nothing, and no tie is lost.
func TestTieLiveMembersKeepSessions(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "herd.db")
	var ties []store.Tie
	var stores []*sqlitestore.Store
	for _, m := range []string{"a", "b", "c"} {
		s := open(t, path)
		_, tie := tied(ctx, t, s, "g", m)
		ties, stores = append(ties, tie), append(stores, s)
	}
	v := storetest.Version(ctx, t, stores[0], "g")
	for i := range 20 {
		if _, err := stores[i%3].ExpireSessions(ctx, "g"); err != nil {
			t.Fatal(err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	for wctx.Err() == nil {
		cs, next, err := stores[0].Changes(wctx, "g", v, 100)
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
}

// A lock file removed, or replaced by a file nobody locks, under a live
// member: the member's tie is lost (it fences), and the store does not
// take the new file's free lock for the member's death: the session keeps
// its TTL.
func TestTieLockFileReplaced(t *testing.T) {
	for _, how := range []string{"removed", "replaced"} {
		t.Run(how, func(t *testing.T) {
			ctx := t.Context()
			path := filepath.Join(t.TempDir(), "herd.db")
			sa, sb := open(t, path), open(t, path)
			a, tieA := tied(ctx, t, sa, "g", "a")
			tied(ctx, t, sb, "g", "b")
			lock := filepath.Join(path+"-herd-ties", a)
			if err := os.Remove(lock); err != nil {
				t.Fatal(err)
			}
			if how == "replaced" {
				if err := os.WriteFile(lock, nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			at := time.Now()
			select {
			case <-tieA.Lost():
				t.Logf("a's tie lost %v after its lock file was %s: %v", time.Since(at).Round(time.Millisecond), how, tieA.Err())
			case <-time.After(5 * time.Second):
				t.Fatalf("a's tie not lost within 5s of its lock file being %s", how)
			}
			if !errors.Is(tieA.Err(), store.ErrUnavailable) {
				t.Errorf("Err = %v; want ErrUnavailable", tieA.Err())
			}
			// Not cut: the earliest expiry is still a TTL away.
			if next, err := sb.ExpireSessions(ctx, "g"); err != nil || next <= tieGrace {
				t.Fatalf("ExpireSessions after a's lock file was %s: next %v, %v; want no cut (above the grace)", how, next, err)
			}
			if _, err := sa.KeepAlive(ctx, "g", a, tieTTL); err != nil {
				t.Fatalf("KeepAlive of a after its lock file was %s: %v; want alive", how, err)
			}
		})
	}
}

// TieSession refuses a session that is not alive, bad timings, and a
// read-only store.
func TestTieSessionRefuses(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "herd.db")
	s := open(t, path)
	cfg := store.TieConfig{TTL: tieTTL, Grace: tieGrace}
	if _, err := s.TieSession(ctx, "g", store.NewSessionID(), cfg); !errors.Is(err, store.ErrSessionExpired) {
		t.Errorf("TieSession of an unknown session: %v; want ErrSessionExpired", err)
	}
	if _, err := s.TieSession(ctx, "g", "x", store.TieConfig{TTL: tieTTL, Grace: tieTTL}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("TieSession with grace = TTL: %v; want ErrInvalid", err)
	}
	id, err := s.OpenSession(ctx, "g", "a", 1, tieTTL)
	if err != nil {
		t.Fatal(err)
	}
	ro := open(t, path, sqlitestore.WithReadOnly())
	if _, err := ro.TieSession(ctx, "g", id, cfg); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("TieSession on a read-only store: %v; want errors.ErrUnsupported", err)
	}
	nfs := open(t, path+"?network_fs=allow")
	if _, err := nfs.TieSession(ctx, "g", id, cfg); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("TieSession on a store that allows a network file system: %v; want errors.ErrUnsupported", err)
	}
}

// A tie that joins the ring and is released at once is seen by the ring
// (its join rings the doorbell, and the others read the ring again):
// its session ends after the grace, with nobody calling ExpireSessions.
// The stores poll data_version once a minute, so only the doorbell wakes
// the ring.
func TestTieNewcomerWatchedAtOnce(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "herd.db")
	slow := sqlitestore.WithPollInterval(time.Minute)
	sa, sb, sn := open(t, path, slow), open(t, path, slow), open(t, path, slow)
	tied(ctx, t, sa, "g", "a")
	tied(ctx, t, sb, "g", "b")
	for range 3 {
		id, err := sn.OpenSession(ctx, "g", "n", 1, tieTTL)
		if err != nil {
			t.Fatal(err)
		}
		// Not needed for the result: it lets the ring read what the
		// session's opening rang for before the tie is made, so that
		// only the tie's own ring can make the others watch it.
		time.Sleep(100 * time.Millisecond)
		tn, err := sn.TieSession(ctx, "g", id, store.TieConfig{TTL: tieTTL, Grace: tieGrace})
		if err != nil {
			t.Fatal(err)
		}
		v := storetest.Version(ctx, t, sa, "g")
		at := time.Now()
		_ = tn.Close()
		d := storetest.WaitExpired(ctx, t, sa, "g", v, id, 5*time.Second).Sub(at)
		t.Logf("a session tied and released at once ended %v later (grace %v)", d.Round(time.Millisecond), tieGrace)
		if d > tieGrace+500*time.Millisecond {
			t.Errorf("a session tied and released at once ended %v later; want within the grace %v and 500ms", d, tieGrace)
		}
	}
	// The waits on the newcomers' locks ended with them: a store waits
	// on no more locks than the group has live ties besides its own.
	for _, s := range []*sqlitestore.Store{sa, sb} {
		if n := s.TieWaits(); n > 1 {
			t.Errorf("a store of one tie waits on %d lock files, after 3 newcomers came and went; want at most 1", n)
		}
	}
}
