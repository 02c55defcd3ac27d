package herd_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/memstore"
)

// slowStore's KeepAlive reaches the store only after delay, as a renewal
// queued behind other clients' large reads on a busy server does.
type slowStore struct {
	store.Store
	delay atomic.Int64 // nanoseconds; 0: none
}

func (s *slowStore) KeepAlive(ctx context.Context, g, id string, ttl time.Duration) (time.Duration, error) {
	if d := time.Duration(s.delay.Load()); d > 0 {
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("slow store: %w: %w", store.ErrUnavailable, ctx.Err())
		case <-time.After(d):
		}
	}
	return s.Store.KeepAlive(ctx, g, id, ttl)
}

// A store that answers every renewal, but later than RenewTimeout: the
// member keeps its session and its partitions (each renewal did renew it),
// rather than cutting every attempt at RenewTimeout and fencing itself.
func TestSlowRenewalsKeepTheSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		slow := &slowStore{Store: memstore.New()}
		const ttl = 2 * time.Second // RenewInterval and RenewTimeout 667 ms, fence after 1.8 s
		var starts atomic.Int64
		m, err := herd.Join(ctx, slow, herd.Config{Group: "g", Member: "a", Partitions: herd.Numbered(4),
			SessionTTL: ttl, Logger: slog.New(slog.DiscardHandler),
			Handler: func(c *herd.Claim) error { starts.Add(1); <-c.Context().Done(); return nil }})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if len(m.Owned()) != 4 || starts.Load() != 4 {
			t.Fatalf("a owns %v after %d starts; want all 4, started once", m.Owned(), starts.Load())
		}
		slow.delay.Store(int64(time.Second))
		time.Sleep(10 * ttl)
		synctest.Wait()
		if n := starts.Load(); len(m.Owned()) != 4 || n != 4 {
			t.Errorf("with renewals answered after 1 s: a owns %v, %d handler starts; want all 4 kept, 4 starts (no fence)", m.Owned(), n)
		}
		cancel()
		<-m.Done()
	})
}
