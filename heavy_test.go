package herd

import (
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/herdhq/herd/internal/turns"
	"github.com/herdhq/herd/store/memstore"
)

// TestPlanGivesTurnBack checks that members whose plans waited for a turn
// plan once one is free and give every turn back: while every turn is
// taken no member claims anything; once they are free the partitions are
// placed, and when the members have left no turn is held (a plan that had
// waited once took a second turn and gave one back).
func TestPlanGivesTurnBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		old := heavy
		heavy = turns.New(2) // of this bubble, so that waits on it are seen as such
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
		heavy.TryTake()
		heavy.TryTake()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if n := running.Load(); n != 0 {
			t.Fatalf("%d partitions running while every turn was taken, want 0", n)
		}
		heavy.Done()
		heavy.Done()
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
		if n := heavy.InUse(); n != 0 {
			t.Errorf("%d turns held after every member left, want 0", n)
		}
	})
}
