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

// lateLog is a store whose log answers its first calls only after delay,
// as a server busy with other members' reads of a large group does.
type lateLog struct {
	store.Store
	late  atomic.Int32 // calls still to answer late
	delay time.Duration
}

func (s *lateLog) Changes(ctx context.Context, group string, after store.Version, max int) ([]store.Change, store.Version, error) {
	if s.late.Add(-1) >= 0 {
		select {
		case <-time.After(s.delay):
		case <-ctx.Done():
			return nil, after, ctx.Err()
		}
	}
	return s.Store.Changes(ctx, group, after, max)
}

// TestFreshWaitsForTheLog checks that a member does not take its copy as
// up to date when the store did not answer its first call to the log in
// time: a reads the group before b's session opens, and its log answers
// its first two calls (bounded by 150 ms, then 300 ms) 400 ms late. It
// plans only once the log has answered, so it sees b, and every partition
// starts once. Taking the unanswered call as "nothing new", it planned
// alone and claimed all 40, and moved 20 to b.
func TestFreshWaitsForTheLog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		var mu sync.Mutex
		starts := map[string]int{}
		cfg := func(id string) Config {
			return Config{
				Group: "g", Member: id, Partitions: Numbered(40),
				Handler: func(c *Claim) error {
					mu.Lock()
					starts[c.Partition]++
					mu.Unlock()
					<-c.Context().Done()
					return nil
				},
				Logger: slog.New(slog.DiscardHandler),
			}
		}
		late := &lateLog{Store: mem, delay: 400 * time.Millisecond}
		late.late.Store(2)
		a, err := Join(t.Context(), late, cfg("a"))
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // a has read the group
		time.Sleep(10 * time.Millisecond)
		b, err := Join(t.Context(), mem, cfg("b"))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if na, nb := len(a.Owned()), len(b.Owned()); na != 20 || nb != 20 {
			t.Fatalf("a owns %d, b %d; want 20 each", na, nb)
		}
		mu.Lock()
		for p, n := range starts {
			if n != 1 {
				t.Errorf("partition %s started %d times, want once", p, n)
			}
		}
		mu.Unlock()
		for _, m := range []*Member{a, b} {
			if err := m.Leave(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestFirstWaitFollowsTheRead: the first call to the log after a read waits
// as long as the read took, within its bounds.
func TestFirstWaitFollowsTheRead(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		took, settle, ttl4, want time.Duration
	}{
		{took: 10 * ms, settle: 100 * ms, ttl4: 2500 * ms, want: freshWait}, // a quick read: at least freshWait
		{took: 300 * ms, settle: 100 * ms, ttl4: 2500 * ms, want: 300 * ms}, // as long as the read
		{took: 3 * time.Second, settle: 100 * ms, ttl4: 2500 * ms, want: 500 * ms},
		{took: 3 * time.Second, settle: time.Second, ttl4: 2500 * ms, want: 2500 * ms},
		{took: 3 * time.Second, settle: -1, ttl4: 2500 * ms, want: freshWait}, // JoinSettle off
	} {
		if got := firstWait(c.took, c.settle, c.ttl4); got != c.want {
			t.Errorf("firstWait(%v, %v, %v) = %v; want %v", c.took, c.settle, c.ttl4, got, c.want)
		}
	}
}
