package herd

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/memstore"
)

// stallLog is a store whose log, once it has shown a session opened (after
// arm is set), answers nothing more until stall has passed, as Redis busy
// with new members' reads of a large group does; it counts ReleaseBatch
// calls.
type stallLog struct {
	store.Store
	arm      atomic.Bool
	until    atomic.Int64 // unix nanoseconds; 0: no stall
	stall    time.Duration
	releases atomic.Int32
}

func (s *stallLog) Changes(ctx context.Context, group string, after store.Version, max int) ([]store.Change, store.Version, error) {
	if u := s.until.Load(); u != 0 {
		if d := time.Until(time.Unix(0, u)); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return nil, after, ctx.Err() // not answered in time
			}
		}
	}
	cs, v, err := s.Store.Changes(ctx, group, after, max)
	if s.arm.Load() && s.until.Load() == 0 && slices.ContainsFunc(cs, func(c store.Change) bool { return c.Kind == store.SessionOpened }) {
		s.until.Store(time.Now().Add(s.stall).UnixNano())
	}
	return cs, v, err
}

func (s *stallLog) ReleaseBatch(ctx context.Context, group, session string, held []store.Ownership) ([]error, error) {
	s.releases.Add(1)
	return s.Store.ReleaseBatch(ctx, group, session, held)
}

// TestPlanWaitsForTheLogAfterASessionOpened: after the log shows a session
// opened, a member plans only once the log has answered again, so that the
// sessions the store logged late, while it was busy, are in the plan. b
// and c open together, but the store logs c's session 300 ms after b's and
// answers a's log 400 ms late: a plans once, for three, and hands off its
// 27 partitions in one release. Planning JoinSettle after b's entry, it
// planned for two, released 20, then 7 more.
func TestPlanWaitsForTheLogAfterASessionOpened(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		st := &stallLog{Store: mem, stall: 400 * time.Millisecond}
		a := joinIdle(t, st, "a", 40)
		time.Sleep(time.Second)
		synctest.Wait()
		if n := len(a.Owned()); n != 40 {
			t.Fatalf("a alone runs %d partitions; want 40", n)
		}
		st.arm.Store(true)
		b, err := mem.OpenSession(t.Context(), "g", "b", 1, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
		c, err := mem.OpenSession(t.Context(), "g", "c", 1, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if n := len(a.Owned()); n != 13 && n != 14 {
			t.Errorf("a runs %d partitions of 40 with b and c; want 13 or 14", n)
		}
		if n := st.releases.Load(); n != 1 {
			t.Errorf("a released its partitions in %d calls; want 1 (one plan, for three members)", n)
		}
		for _, id := range []string{b, c} {
			if err := mem.CloseSession(t.Context(), "g", id); err != nil {
				t.Fatal(err)
			}
		}
		if err := a.Leave(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
}

// TestJoinSettleCountsFromTheNews: a session is new to plan when plan first
// sees it, but the membership settles JoinSettle after the feed brought the
// news: a plan that came late meanwhile does not wait again.
func TestJoinSettleCountsFromTheNews(t *testing.T) {
	m := &Member{cfg: Config{JoinSettle: 100 * time.Millisecond}}
	m.rep.fresh = true
	sess := &session{id: "A"}
	snap := &store.Snapshot{Sessions: []store.SessionInfo{{ID: "A"}, {ID: "B"}}}

	m.rep.openedAt = time.Now().Add(-time.Second) // the feed brought A and B a second ago
	if pl, ok, err := m.planChecks(t.Context(), sess, snap, 0, nil); err != nil || !ok {
		t.Fatalf("sessions new to plan, brought a second ago: planChecks = %+v, %v, %v; want to plan now", pl, ok, err)
	}
	snap.Sessions = append(snap.Sessions, store.SessionInfo{ID: "C"})
	m.rep.openedAt = time.Now() // C just came
	pl, ok, err := m.planChecks(t.Context(), sess, snap, 0, nil)
	if err != nil || ok || pl.next <= 0 || pl.next > m.cfg.JoinSettle {
		t.Fatalf("a session just brought: planChecks = %+v, %v, %v; want to wait up to JoinSettle", pl, ok, err)
	}
}

// claimLog is a store that notes when ClaimBatch was called.
type claimLog struct {
	store.Store
	mu sync.Mutex
	at []time.Time
}

func (s *claimLog) ClaimBatch(ctx context.Context, group, session string, ps []string) ([]store.ClaimResult, error) {
	s.mu.Lock()
	s.at = append(s.at, time.Now())
	s.mu.Unlock()
	return s.Store.ClaimBatch(ctx, group, session, ps)
}

// claimsSince counts the ClaimBatch calls made after t.
func (s *claimLog) claimsSince(t time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, at := range s.at {
		if at.After(t) {
			n++
		}
	}
	return n
}

// TestPlanWaitsForTheNextExpiryDueSoon: sessions that crashed together
// expire one after the other; a member that the store told another expiry
// is due within a fortieth of SessionTTL plans once, after it, instead of
// once per expiry. b, c and d expire 200 ms apart (TTL/40 is 250 ms): a
// takes their 30 partitions back in one claim, at once after d's expiry.
// Planning at each expiry, it claimed three times. With others: another
// member has the store expire each session as soon as it is due, so the
// log brings a the news before a's own call, whose answer says when the
// next is due.
func TestPlanWaitsForTheNextExpiryDueSoon(t *testing.T) {
	for _, others := range []bool{false, true} {
		t.Run(fmt.Sprintf("others=%v", others), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testExpirySettle(t, others) })
		})
	}
}

func testExpirySettle(t *testing.T, others bool) {
	mem := memstore.New()
	st := &claimLog{Store: mem}
	a := joinIdle(t, st, "a", 40)
	time.Sleep(time.Second)
	synctest.Wait()
	// Sessions that never renew, opened together: they expire at 6 s,
	// 6.2 s and 6.4 s (a renews at 3.3 s and learns when the first is
	// due).
	for i, m := range []string{"b", "c", "d"} {
		if _, err := mem.OpenSession(t.Context(), "g", m, 1, 5*time.Second+time.Duration(i)*200*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(2 * time.Second)
	synctest.Wait()
	if n := len(a.Owned()); n != 10 {
		t.Fatalf("a runs %d partitions with b, c and d; want 10", n)
	}
	firstDue := time.Now().Add(3 * time.Second) // 6 s
	if others {
		time.Sleep(3 * time.Second)
		for range 3 {
			if _, err := mem.ExpireSessions(t.Context(), "g"); err != nil {
				t.Fatal(err)
			}
			time.Sleep(200 * time.Millisecond)
		}
		time.Sleep(400 * time.Millisecond) // past d's expiry at 6.4 s
	} else {
		time.Sleep(4 * time.Second) // past d's expiry at 6.4 s
	}
	synctest.Wait()
	if n := len(a.Owned()); n != 40 {
		t.Fatalf("a runs %d partitions after b, c and d expired; want 40", n)
	}
	if n := st.claimsSince(firstDue.Add(-time.Millisecond)); n != 1 {
		t.Errorf("a claimed in %d calls after b, c and d expired; want 1 (one plan, after the last)", n)
	}
	st.mu.Lock()
	last := st.at[len(st.at)-1]
	st.mu.Unlock()
	// d is expired at most 10 ms after it is due (expireDelay), and its
	// partitions are claimed at once.
	if late := last.Sub(firstDue.Add(400 * time.Millisecond)); late > 250*time.Millisecond {
		t.Errorf("a claimed %v after d was due; want within 250 ms", late)
	}
	if err := a.Leave(t.Context()); err != nil {
		t.Fatal(err)
	}
}
