package herd_test

import (
	"context"
	"errors"
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

// deafStore passes calls to a store until it is cut; from then on every call
// (but SetPartitions) waits for its context's deadline and ignores
// cancellation, as the client of a server that stopped answering does when
// it honours deadlines only.
type deafStore struct {
	store.Store
	cut atomic.Bool
}

func (d *deafStore) wait(ctx context.Context) error {
	if !d.cut.Load() {
		return nil
	}
	dl, ok := ctx.Deadline()
	if !ok {
		<-ctx.Done() // a call without a deadline: only cancellation ends it
		return fmt.Errorf("deaf store: %w: %w", store.ErrUnavailable, ctx.Err())
	}
	time.Sleep(time.Until(dl))
	<-ctx.Done() // the deadline has passed: its timer fires at this instant
	return fmt.Errorf("deaf store: %w: %w", store.ErrUnavailable, context.DeadlineExceeded)
}

func (d *deafStore) OpenSession(ctx context.Context, g, m string, w int, ttl time.Duration) (string, error) {
	if err := d.wait(ctx); err != nil {
		return "", err
	}
	return d.Store.OpenSession(ctx, g, m, w, ttl)
}

func (d *deafStore) CloseSession(ctx context.Context, g, s string) error {
	if err := d.wait(ctx); err != nil {
		return err
	}
	return d.Store.CloseSession(ctx, g, s)
}

func (d *deafStore) Snapshot(ctx context.Context, g string) (*store.Snapshot, error) {
	if err := d.wait(ctx); err != nil {
		return nil, err
	}
	return d.Store.Snapshot(ctx, g)
}

func (d *deafStore) Restore(ctx context.Context, g, p string, e uint64, v []byte) error {
	if err := d.wait(ctx); err != nil {
		return err
	}
	return d.Store.Restore(ctx, g, p, e, v)
}

func (d *deafStore) ClaimBatch(ctx context.Context, g, s string, ps []string) ([]store.ClaimResult, error) {
	if err := d.wait(ctx); err != nil {
		return nil, err
	}
	return d.Store.ClaimBatch(ctx, g, s, ps)
}

func (d *deafStore) ReleaseBatch(ctx context.Context, g, s string, held []store.Ownership) ([]error, error) {
	if err := d.wait(ctx); err != nil {
		return nil, err
	}
	return d.Store.ReleaseBatch(ctx, g, s, held)
}

func (d *deafStore) Changes(ctx context.Context, g string, after store.Version, max int) ([]store.Change, store.Version, error) {
	if err := d.wait(ctx); err != nil {
		return nil, after, err
	}
	return d.Store.Changes(ctx, g, after, max)
}

func (d *deafStore) ExpireSessions(ctx context.Context, g string) (time.Duration, error) {
	if err := d.wait(ctx); err != nil {
		return 0, err
	}
	return d.Store.ExpireSessions(ctx, g)
}

func (d *deafStore) KeepAlive(ctx context.Context, g, s string, ttl time.Duration) (time.Duration, error) {
	if err := d.wait(ctx); err != nil {
		return 0, err
	}
	return d.Store.KeepAlive(ctx, g, s, ttl)
}

func (d *deafStore) Checkpoint(ctx context.Context, g, p string, e uint64, v []byte) error {
	if err := d.wait(ctx); err != nil {
		return err
	}
	return d.Store.Checkpoint(ctx, g, p, e, v)
}

// A member whose store stops answering (and whose client ignores
// cancellation) stops every handler, even one blocked in Checkpoint with a
// long timeout of its own, before another member starts its partitions:
// the member bounds its handlers' store calls by the session's fence time.
func TestFenceBoundsBlockedCheckpoints(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		mem := memstore.New()
		deaf := &deafStore{Store: mem}

		var mu sync.Mutex
		stopped := map[string]time.Time{} // partition -> when the cut member's handler returned
		started := map[string]time.Time{} // partition -> when the other member started it
		var fencedErrs atomic.Int32
		handler := func(member string) herd.Handler {
			return func(c *herd.Claim) error {
				mu.Lock()
				if member == "b" {
					started[c.Partition] = time.Now()
				}
				mu.Unlock()
				defer func() {
					if member == "a" {
						mu.Lock()
						stopped[c.Partition] = time.Now()
						mu.Unlock()
					}
				}()
				for c.Context().Err() == nil {
					// A long timeout of the handler's own, not its claim's context.
					cctx, ccancel := context.WithTimeout(context.Background(), time.Hour)
					err := c.Checkpoint(cctx, []byte("x"))
					ccancel()
					if errors.Is(err, herd.ErrFenced) {
						fencedErrs.Add(1)
					}
					select {
					case <-c.Context().Done():
					case <-time.After(100 * time.Millisecond):
					}
				}
				return nil
			}
		}
		quiet := slog.New(slog.DiscardHandler)
		a, err := herd.Join(ctx, deaf, herd.Config{Group: "g", Member: "a", Partitions: herd.Numbered(8), Handler: handler("a"), Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if len(a.Owned()) != 8 {
			t.Fatalf("a owns %v, want all 8 partitions", a.Owned())
		}
		b, err := herd.Join(ctx, mem, herd.Config{Group: "g", Member: "b", Handler: handler("b"), Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		mine := map[string]bool{}
		for _, p := range a.Owned() {
			mine[p] = true
		}
		if len(mine) != 4 {
			t.Fatalf("a owns %v after b joined, want 4", a.Owned())
		}

		deaf.cut.Store(true)
		time.Sleep(herd.DefaultSessionTTL + 5*time.Second)
		synctest.Wait()
		if got := len(b.Owned()); got != 8 {
			t.Fatalf("b owns %d partitions after a was cut off for longer than its TTL, want 8", got)
		}
		mu.Lock()
		defer mu.Unlock()
		for p := range mine {
			s, ok := stopped[p]
			if !ok {
				t.Errorf("partition %s: a's handler never returned", p)
				continue
			}
			if !s.Before(started[p]) {
				t.Errorf("partition %s: b started it at %v, a's handler returned at %v", p, started[p], s)
			}
		}
		if fencedErrs.Load() == 0 {
			t.Errorf("no Checkpoint failed with ErrFenced; the test did not block a handler in the store")
		}
		deaf.cut.Store(false)
		cancel()
		<-a.Done()
		<-b.Done()
	})
}
