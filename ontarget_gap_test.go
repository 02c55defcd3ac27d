package herd

import (
	"context"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/herdhq/herd/store/memstore"
)

// TestJoinerClaimsWithoutPlanGap: a member that joins a placed group
// claims the partitions handed to it as their releases come, not planGap
// after its own full plan. In a bubble a plan takes no time, so planGap is
// 1 µs per record: 20 ms on 20,000 partitions, which the claims of what
// the others release toward the joiner waited for.
func TestJoinerClaimsWithoutPlanGap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const parts = 20_000
		st := memstore.New()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		join := func(id string) *Member {
			m, err := Join(ctx, st, Config{
				Group: "g", Member: id, Partitions: Numbered(parts),
				Handler: func(c *Claim) error { <-c.Context().Done(); return nil },
				Logger:  slog.New(slog.DiscardHandler),
			})
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
		ms := []*Member{join("m1"), join("m2")}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		start := time.Now()
		ms = append(ms, join("m3"))
		balanced := func() bool {
			for _, m := range ms {
				if n := len(m.Owned()); n < parts/3 || n > parts/3+1 {
					return false
				}
			}
			return true
		}
		for !balanced() {
			if time.Since(start) > 5*time.Second {
				t.Fatalf("not balanced 5 s after the join: %d, %d, %d", len(ms[0].Owned()), len(ms[1].Owned()), len(ms[2].Owned()))
			}
			time.Sleep(time.Millisecond)
			synctest.Wait()
		}
		took := time.Since(start)
		t.Logf("balanced %v after the join", took)
		// The join settles for JoinSettle (the others wait that long after
		// the session opened, the joiner after its read of the group); the
		// claims follow at once.
		if most := DefaultJoinSettle + 5*time.Millisecond; took > most {
			t.Errorf("balanced %v after the join; want at most %v (JoinSettle, then claims as the releases come)", took, most)
		}
		for _, m := range ms {
			if err := m.Leave(t.Context()); err != nil {
				t.Error(err)
			}
		}
	})
}
