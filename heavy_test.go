package herd

import (
	"context"
	"log/slog"
	"slices"
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
		tr := newTurns(2)
		var running, most atomic.Int32
		var wg sync.WaitGroup
		release := make(chan struct{})
		for range 10 {
			wg.Go(func() {
				if !tr.take(context.Background(), false) {
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
		tr.tryTake()
		tr.tryTake()
		ctx, cancel := context.WithCancel(context.Background())
		got := make(chan bool)
		go func() { got <- tr.take(ctx, false) }()
		synctest.Wait()
		cancel()
		if <-got {
			t.Error("take gave a turn after its context ended, with none free")
		}
		if n := tr.inUse(); n != 2 {
			t.Errorf("%d turns taken after a wait that ended, want 2", n)
		}
	})
}

// TestTurnsFirst checks the order turns are handed over in: those asked
// for first before the others, each kind in the order asked; and that a
// turn handed over as its waiter's context ended goes to the next.
func TestTurnsFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := newTurns(1)
		tr.tryTake()
		var order []string
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, w := range []struct {
			name  string
			first bool
		}{{"rest1", false}, {"first1", true}, {"rest2", false}, {"first2", true}} {
			wg.Go(func() {
				if tr.take(context.Background(), w.first) {
					mu.Lock()
					order = append(order, w.name)
					mu.Unlock()
					tr.done()
				}
			})
			synctest.Wait() // queued in this order
		}
		tr.done()
		wg.Wait()
		if want := []string{"first1", "first2", "rest1", "rest2"}; !slices.Equal(order, want) {
			t.Errorf("turns handed over in the order %v, want %v", order, want)
		}
		if n := tr.inUse(); n != 0 {
			t.Errorf("%d turns held at the end, want 0", n)
		}

		// A waiter whose context ends leaves the queue; the turn goes on.
		tr.tryTake()
		ctx, cancel := context.WithCancel(context.Background())
		gone := make(chan bool)
		go func() { gone <- tr.take(ctx, true) }()
		next := make(chan bool)
		go func() { next <- tr.take(context.Background(), false) }()
		synctest.Wait()
		cancel()
		if <-gone {
			t.Error("take gave a turn after its context ended, with none free")
		}
		tr.done()
		if !<-next {
			t.Error("the next waiter got no turn")
		}
		tr.done()
		if n := tr.inUse(); n != 0 {
			t.Errorf("%d turns held at the end, want 0", n)
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
		heavy = newTurns(2) // of this bubble, so that waits on it are seen as such
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
		heavy.tryTake()
		heavy.tryTake()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if n := running.Load(); n != 0 {
			t.Fatalf("%d partitions running while every turn was taken, want 0", n)
		}
		heavy.done()
		heavy.done()
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
		if n := heavy.inUse(); n != 0 {
			t.Errorf("%d turns held after every member left, want 0", n)
		}
	})
}
