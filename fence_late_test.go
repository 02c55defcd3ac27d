package herd_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/memstore"
)

// lateStore passes calls to a store until it is cut; from then on
// KeepAlive returns only overrun after its context's deadline, as a client
// does that answers a deadline by cancelling the query on the server and
// waiting for it (seen with PostgreSQL through network faults:
// internal/netpart's seed 3 on postgres, a renewal back 1.45 s after its
// deadline).
type lateStore struct {
	store.Store
	cut     atomic.Bool
	overrun time.Duration
}

func (l *lateStore) KeepAlive(ctx context.Context, g, s string, ttl time.Duration) (time.Duration, error) {
	if !l.cut.Load() {
		return l.Store.KeepAlive(ctx, g, s, ttl)
	}
	<-ctx.Done()
	time.Sleep(l.overrun)
	return 0, fmt.Errorf("late store: %w: %w", store.ErrUnavailable, ctx.Err())
}

// A member whose renewal call overruns its deadline fences itself on time
// anyway: its handlers are cancelled SessionTTL-FenceMargin after the last
// renewal that succeeded was sent, not when the late call returns, which
// may be after the store expired the session and another member started
// its partitions.
func TestFenceDoesNotWaitForALateRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		late := &lateStore{Store: memstore.New(), overrun: 1500 * time.Millisecond}
		const ttl = 2 * time.Second
		var mu sync.Mutex
		cancelled := map[string]time.Time{}
		handler := func(c *herd.Claim) error {
			<-c.Context().Done()
			mu.Lock()
			if _, ok := cancelled[c.Partition]; !ok { // the first session's handler
				cancelled[c.Partition] = time.Now()
			}
			mu.Unlock()
			return nil
		}
		quiet := slog.New(slog.DiscardHandler)
		a, err := herd.Join(ctx, late, herd.Config{Group: "g", Member: "a", Partitions: herd.Numbered(4),
			SessionTTL: ttl, Handler: handler, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if len(a.Owned()) != 4 {
			t.Fatalf("a owns %v, want all 4 partitions", a.Owned())
		}
		cutAt := time.Now()
		late.cut.Store(true)
		time.Sleep(ttl + 3*late.overrun)
		synctest.Wait()
		// The last renewal that succeeded was sent before the cut: the fence
		// is at most TTL - TTL/10 after it.
		fence := cutAt.Add(ttl - ttl/10)
		mu.Lock()
		for _, p := range []string{"0", "1", "2", "3"} {
			at, ok := cancelled[p]
			if !ok {
				t.Errorf("partition %s: the handler was never cancelled", p)
			} else if at.After(fence) {
				t.Errorf("partition %s: handler cancelled %v after the cut, after the fence time %v (the store may expire the session at %v)",
					p, at.Sub(cutAt), fence.Sub(cutAt), ttl)
			}
		}
		mu.Unlock()
		late.cut.Store(false)
		cancel()
		<-a.Done()
	})
}
