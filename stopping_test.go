package herd_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/internal/tracker"
	"github.com/herdhq/herd/store/memstore"
)

// TestScenarioPartitionsStillStoppingAreClaimedOnceStopped: a member loses
// its session while its handlers take a while to stop (a last checkpoint
// through a slow store, as in the randomized fault test's seed 12), and
// opens a new one at once. Its first plan of the new session gives it
// partitions whose handlers of the lost session are still stopping, which
// it cannot claim yet. Once they have stopped, it claims them: they must not
// run nowhere until something else makes it plan in full (issue 28, item 9:
// the member planned on its aim, which only claims what is released after
// it was set, and the partitions ran nowhere for good).
func TestScenarioPartitionsStillStoppingAreClaimedOnceStopped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		mem := memstore.New()
		parts := []string{"0", "1", "2", "3"}
		tr := tracker.New()
		var mu sync.Mutex
		running := map[string]time.Time{} // partition -> when its running handler started
		const stopping = 5 * time.Second  // longer than a plan after a new session takes
		m, err := herd.Join(ctx, mem, herd.Config{
			Group: "g", Member: "a", Partitions: herd.Numbered(len(parts)),
			Logger: slog.New(slog.DiscardHandler),
			Handler: tr.Wrap("a", func(c *herd.Claim) error {
				mu.Lock()
				began := time.Now()
				running[c.Partition] = began
				mu.Unlock()
				<-c.Context().Done()
				mu.Lock()
				if running[c.Partition] == began {
					delete(running, c.Partition)
				}
				mu.Unlock()
				// The handler's last work after its cancellation; virtual time.
				<-time.After(stopping)
				return nil
			}),
		})
		if err != nil {
			t.Fatal(err)
		}
		waitBalanced := func(step string, limit time.Duration) {
			t.Helper()
			wctx, wcancel := context.WithTimeout(ctx, limit)
			defer wcancel()
			if err := tr.WaitBalanced(wctx, parts, []string{"a"}); err != nil {
				t.Fatalf("%s: not balanced within %v: %v\n%s", step, limit, err, tr.Table([]string{"a"}))
			}
		}
		waitBalanced("a joins", 5*time.Second)

		// The store forgets the session; the member learns it at its next
		// renewal, cancels its handlers and opens a new session at once.
		lost, lostAt := m.Session(), time.Now()
		if err := mem.CloseSession(ctx, "g", lost); err != nil {
			t.Fatal(err)
		}
		for m.Session() == lost || m.Session() == "" {
			time.Sleep(10 * time.Millisecond) // virtual time
		}
		// Every handler of the lost session stops within stopping from
		// now; every partition must run again, in the new session, a
		// moment later.
		deadline := time.Now().Add(stopping + time.Second)
		for {
			mu.Lock()
			var idle []string
			for _, p := range parts {
				if !running[p].After(lostAt) {
					idle = append(idle, p)
				}
			}
			mu.Unlock()
			if len(idle) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("partitions %v did not run again %v after the lost session's handlers began to stop",
					idle, stopping+time.Second)
			}
			time.Sleep(10 * time.Millisecond) // virtual time
		}
		waitBalanced("after the loss", time.Second)
		if err := m.Leave(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
