package herd

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/memstore"
)

// slowAfterOpening is a member's store whose log, once it has delivered a
// session's opening (after armed is set), answers the next call late, as
// a server busy with other members' reads of a large group does.
type slowAfterOpening struct {
	store.Store
	delay time.Duration
	armed atomic.Bool
	late  atomic.Bool // the next call is late
}

func (s *slowAfterOpening) Changes(ctx context.Context, group string, after store.Version, max int) ([]store.Change, store.Version, error) {
	if s.late.Swap(false) {
		select {
		case <-time.After(s.delay):
		case <-ctx.Done():
			return nil, after, ctx.Err()
		}
	}
	cs, v, err := s.Store.Changes(ctx, group, after, max)
	for _, c := range cs {
		if c.Kind == store.SessionOpened && s.armed.CompareAndSwap(true, false) {
			s.late.Store(true)
		}
	}
	return cs, v, err
}

// TestJoinSettleWaitsForTheLog checks that a member waits for the log to
// answer after a session opens before it takes the membership as settled:
// b and c join a, which runs 40 partitions, 10 ms apart, and a's log
// delivers c's opening only 400 ms after b's, when JoinSettle (100 ms) has
// long passed. a hands off its 26 partitions in one step, once it knows
// both; planning when JoinSettle ran out, it handed 20 off to b, then 6
// more once c showed, planning twice (in a large group, a plan of every
// old member more).
func TestJoinSettleWaitsForTheLog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		var mu sync.Mutex
		var stops []time.Time // a's handlers that ended before the members left
		var leaving atomic.Bool
		cfg := func(id string) Config {
			return Config{
				Group: "g", Member: id, Partitions: Numbered(40),
				Handler: func(c *Claim) error {
					<-c.Context().Done()
					if id == "a" && !leaving.Load() {
						mu.Lock()
						stops = append(stops, time.Now())
						mu.Unlock()
					}
					return nil
				},
				Logger: slog.New(slog.DiscardHandler),
			}
		}
		slow := &slowAfterOpening{Store: mem, delay: 400 * time.Millisecond}
		a, err := Join(t.Context(), slow, cfg("a"))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if n := len(a.Owned()); n != 40 {
			t.Fatalf("a alone owns %d partitions, want 40", n)
		}
		slow.armed.Store(true)
		b, err := Join(t.Context(), mem, cfg("b"))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
		c, err := Join(t.Context(), mem, cfg("c"))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if na, nb, nc := len(a.Owned()), len(b.Owned()), len(c.Owned()); na+nb+nc != 40 || min(na, nb, nc) < 13 || max(na, nb, nc) > 14 {
			t.Fatalf("owned after the joins: a %d, b %d, c %d; want 13-14 each", na, nb, nc)
		}
		leaving.Store(true)
		mu.Lock()
		if len(stops) != 26 {
			t.Errorf("a stopped %d handlers, want 26", len(stops))
		} else if first, last := stops[0], stops[len(stops)-1]; !last.Equal(first) {
			t.Errorf("a handed off in steps %v apart: it planned before the log showed c's session", last.Sub(first))
		}
		mu.Unlock()
		for _, m := range []*Member{a, b, c} {
			if err := m.Leave(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
	})
}
