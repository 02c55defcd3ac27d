package herd

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/memstore"
)

// lagLog is a store whose log shows nothing after entry ceiling (0: no
// ceiling) until lift is closed, as the log of a member whose copy is
// seconds behind (a hundred members applying a placement's entries on two
// cores) does, and whose first ClaimBatch waits for gate.
type lagLog struct {
	store.Store
	ceiling atomic.Uint64
	lift    chan struct{}
	gate    chan struct{}
	claims  atomic.Int32
}

func (s *lagLog) Changes(ctx context.Context, group string, after store.Version, max int) ([]store.Change, store.Version, error) {
	if c := s.ceiling.Load(); c > 0 && after.Seq >= c {
		select {
		case <-s.lift:
			return s.Store.Changes(ctx, group, after, max)
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, after, nil // a store at rest answers by the deadline
			}
			return nil, after, ctx.Err()
		}
	}
	cs, v, err := s.Store.Changes(ctx, group, after, max)
	c := s.ceiling.Load() // a call under way when it was set
	if i := slices.IndexFunc(cs, func(ch store.Change) bool { return c > 0 && ch.Version.Seq > c }); i >= 0 {
		cs = cs[:i]
		if i > 0 {
			v = cs[i-1].Version
		} else {
			v = after
		}
	}
	return cs, v, err
}

func (s *lagLog) ClaimBatch(ctx context.Context, group, session string, partitions []string) ([]store.ClaimResult, error) {
	if s.claims.Add(1) == 1 {
		select {
		case <-s.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s.Store.ClaimBatch(ctx, group, session, partitions)
}

// TestHandOffBeforeTheCopyShowsTheClaim: a member whose copy does not show
// its own claims yet hands off the partitions the target gives to another
// all the same. a plans alone and claims 40 partitions; b's session opens
// while the claim is under way, so that b's entry comes before a's claims
// in the log, and a's copy then stops at b's entry. a plans for two and
// releases b's 20 at once. Waiting for its copy to show the claims (as it
// did), it kept all 40 for as long as the copy lagged: in herd bench
// --scenario large, seconds, while the others waited for them.
func TestHandOffBeforeTheCopyShowsTheClaim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		lag := &lagLog{Store: mem, lift: make(chan struct{}), gate: make(chan struct{})}
		a := joinIdle(t, lag, "a", 40)
		time.Sleep(time.Second) // a planned alone; its claim waits at the gate
		synctest.Wait()
		snap, err := mem.Snapshot(t.Context(), "g")
		if err != nil {
			t.Fatal(err)
		}
		lag.ceiling.Store(snap.Version.Seq + 1) // b's session: the last entry a sees
		b, err := mem.OpenSession(t.Context(), "g", "b", 1, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		close(lag.gate)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if n := len(a.Owned()); n != 20 {
			t.Errorf("a runs %d partitions with b in its copy and its own claims not; want 20", n)
		}
		snap, err = mem.Snapshot(t.Context(), "g")
		if err != nil {
			t.Fatal(err)
		}
		held := 0
		for _, o := range snap.Owners {
			if o.Session != "" {
				held++
			}
		}
		if held != 20 {
			t.Errorf("the store shows %d partitions held; want a's 20", held)
		}
		close(lag.lift)
		if err := mem.CloseSession(t.Context(), "g", b); err != nil {
			t.Fatal(err)
		}
		if err := a.Leave(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
}

// joinIdle joins member to group "g" of st with n partitions, each handler
// waiting for its claim to end.
func joinIdle(t *testing.T, st store.Store, member string, n int) *Member {
	t.Helper()
	m, err := Join(t.Context(), st, Config{
		Group: "g", Member: member, Partitions: Numbered(n),
		Handler: func(c *Claim) error { <-c.Context().Done(); return nil },
		Logger:  slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}
