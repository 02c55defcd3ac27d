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
	"github.com/herdhq/herd/internal/tracker"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/memstore"
)

// idleWatch measures, per partition, how long it ran nowhere: from the
// moment its last handler returned (or the watch began) to the moment a
// handler started it again. Safe for concurrent use.
type idleWatch struct {
	mu      sync.Mutex
	running map[string]int       // partition -> handlers running it
	since   map[string]time.Time // partition -> when it last ran nowhere from
	from    time.Time            // gaps are counted from here (zero: not yet)
	worst   time.Duration
	worstP  string
}

func newIdleWatch(parts []string) *idleWatch {
	w := &idleWatch{running: map[string]int{}, since: map[string]time.Time{}}
	for _, p := range parts {
		w.since[p] = time.Now()
	}
	return w
}

// wrap counts h's runs of its partitions.
func (w *idleWatch) wrap(h herd.Handler) herd.Handler {
	return func(c *herd.Claim) error {
		w.started(c.Partition)
		defer w.stopped(c.Partition)
		return h(c)
	}
}

func (w *idleWatch) started(p string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.running[p] == 0 {
		w.gap(p, time.Now())
	}
	w.running[p]++
}

func (w *idleWatch) stopped(p string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.running[p]--; w.running[p] == 0 {
		w.since[p] = time.Now()
	}
}

// gap counts p's stretch of running nowhere up to now. Called with w.mu held.
func (w *idleWatch) gap(p string, now time.Time) {
	if w.from.IsZero() {
		return
	}
	if d := now.Sub(latest(w.since[p], w.from)); d > w.worst {
		w.worst, w.worstP = d, p
	}
}

// watch starts counting gaps (those begun before count from now).
func (w *idleWatch) watch() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.from = time.Now()
}

// longest returns the longest stretch a partition ran nowhere since watch,
// including the stretches still under way.
func (w *idleWatch) longest() (time.Duration, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	for p := range w.since {
		if w.running[p] == 0 {
			w.gap(p, now)
		}
	}
	return w.worst, w.worstP
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// failReleaseOnce fails the first ReleaseBatch it gets once armed, before
// it reaches the store (the store answered an error), and passes every
// other call.
type failReleaseOnce struct {
	store.Store
	armed  atomic.Bool
	failed atomic.Int32
}

func (s *failReleaseOnce) ReleaseBatch(ctx context.Context, g, sess string, held []store.Ownership) ([]error, error) {
	if s.armed.CompareAndSwap(true, false) {
		s.failed.Add(1)
		return nil, fmt.Errorf("injected failure of a release of %d partitions: %w", len(held), store.ErrUnavailable)
	}
	return s.Store.ReleaseBatch(ctx, g, sess, held)
}

// TestScenarioFailedReleaseIsRetried: a member hands two partitions off to
// a member that joins, and the store answers the batch release with an
// error, once. The release is retried: the partitions run again on the new
// member within one renew interval, instead of staying owned by the first
// member's live session, run nowhere (issue 28, item 8).
func TestScenarioFailedReleaseIsRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		mem := memstore.New()
		parts := []string{"0", "1", "2", "3"}
		tr, idle := tracker.New(), newIdleWatch(parts)
		join := func(id string, st store.Store) *herd.Member {
			m, err := herd.Join(ctx, st, herd.Config{
				Group: "g", Member: id, Partitions: herd.Numbered(len(parts)),
				Logger:  slog.New(slog.DiscardHandler),
				Handler: idle.wrap(tr.Wrap(id, nil)),
			})
			if err != nil {
				t.Fatalf("join %s: %v", id, err)
			}
			return m
		}
		waitBalanced := func(step string, members []string, limit time.Duration) {
			t.Helper()
			wctx, wcancel := context.WithTimeout(ctx, limit)
			defer wcancel()
			if err := tr.WaitBalanced(wctx, parts, members); err != nil {
				t.Fatalf("%s: not balanced within %v: %v\n%s", step, limit, err, tr.Table(members))
			}
		}
		aStore := &failReleaseOnce{Store: mem}
		a := join("a", aStore)
		waitBalanced("a joins", []string{"a"}, 5*time.Second)

		aStore.armed.Store(true)
		idle.watch()
		b := join("b", mem)
		renew := herd.DefaultSessionTTL / 3
		waitBalanced("b joins, a's first release fails", []string{"a", "b"}, renew)
		if aStore.failed.Load() != 1 {
			t.Fatalf("the release never failed: the test proves nothing")
		}
		if d, p := idle.longest(); d > renew {
			t.Fatalf("partition %s ran nowhere for %v, more than a renew interval (%v)", p, d, renew)
		}
		for _, m := range []*herd.Member{a, b} {
			if err := m.Leave(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
}
