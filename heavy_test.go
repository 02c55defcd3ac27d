package herd

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/herdhq/herd/store/memstore"
)

// TestTurns checks that heavy steps take turns: never more at once than the
// turns' capacity, each step in the end, and a wait for a turn ends with
// its context.
func TestTurns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := make(turns, 2)
		var running, most atomic.Int32
		var wg sync.WaitGroup
		release := make(chan struct{})
		for range 10 {
			wg.Go(func() {
				if !tr.take(context.Background()) {
					t.Error("take without a deadline gave no turn")
					return
				}
				n := running.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				<-release
				running.Add(-1)
				tr.done()
			})
		}
		synctest.Wait() // two steps run, eight wait for a turn
		if n := running.Load(); n != 2 {
			t.Fatalf("%d steps running with 2 turns, want 2", n)
		}
		close(release)
		wg.Wait()
		if m := most.Load(); m != 2 {
			t.Errorf("at most %d steps ran at once, want 2", m)
		}

		// Both turns taken: a wait ends with its context, without a turn.
		tr <- struct{}{}
		tr <- struct{}{}
		ctx, cancel := context.WithCancel(context.Background())
		got := make(chan bool)
		go func() { got <- tr.take(ctx) }()
		synctest.Wait()
		cancel()
		if <-got {
			t.Error("take gave a turn after its context ended, with none free")
		}
		if len(tr) != 2 {
			t.Errorf("%d turns taken after a wait that ended, want 2", len(tr))
		}
	})
}

// TestPlanGivesTurnBack checks that members whose plans waited for a turn
// plan once one is free and give every turn back: while every turn is
// taken no member claims anything; once they are free the partitions are
// placed, and when the members have left no turn is held (a plan that had
// waited once took a second turn and gave one back).
func TestPlanGivesTurnBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		old := heavy
		heavy = make(turns, 2) // of this bubble, so that waits on it are seen as such
		defer func() { heavy = old }()

		st := memstore.New()
		var running atomic.Int32
		var ms []*Member
		for _, id := range []string{"a", "b", "c"} {
			m, err := Join(t.Context(), st, Config{
				Group: "g", Member: id, Partitions: Numbered(30),
				Handler: func(c *Claim) error {
					running.Add(1)
					defer running.Add(-1)
					<-c.Context().Done()
					return nil
				},
				Logger:     slog.New(slog.DiscardHandler),
				JoinSettle: 2 * time.Second,
			})
			if err != nil {
				t.Fatal(err)
			}
			ms = append(ms, m)
		}
		// The members have read the group and wait for JoinSettle: take
		// every turn, so that their plans wait for one when it ends.
		time.Sleep(time.Second)
		heavy <- struct{}{}
		heavy <- struct{}{}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if n := running.Load(); n != 0 {
			t.Fatalf("%d partitions running while every turn was taken, want 0", n)
		}
		<-heavy
		<-heavy
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if n := running.Load(); n != 30 {
			t.Fatalf("%d partitions running once the turns were free, want 30", n)
		}
		for _, m := range ms {
			if err := m.Leave(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		if n := len(heavy); n != 0 {
			t.Errorf("%d turns held after every member left, want 0", n)
		}
	})
}
