package herd

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/herdhq/herd/balance"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/memstore"
)

// slowClaims is a store whose claims take a second, as on a host busy
// with a fleet's plans.
type slowClaims struct{ store.Store }

func (s slowClaims) ClaimBatch(ctx context.Context, group, session string, ps []string) ([]store.ClaimResult, error) {
	time.Sleep(time.Second)
	return s.Store.ClaimBatch(ctx, group, session, ps)
}

// TestSlowRoundKeepsTheTarget: a member whose plan and claims took a
// second, while the others carry out the same placement with a pause of
// 1.5 s (more than a third of RenewInterval, less than two such rounds),
// plans in full no more: the pause is the fleet at work, and the copy
// shows the target met before its life ends.
func TestSlowRoundKeepsTheTarget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const members, parts, g = 10, 1000, "g"
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		st := memstore.New()
		ps := make([]store.Partition, parts)
		for i := range ps {
			ps[i] = store.Partition{ID: fmt.Sprintf("p%04d", i)}
		}
		if _, err := st.SetPartitions(ctx, g, store.PartitionSet{Partitions: ps}); err != nil {
			t.Fatal(err)
		}
		for i := 1; i < members; i++ {
			if _, err := st.OpenSession(ctx, g, fmt.Sprintf("m%d", i), 1, time.Hour); err != nil {
				t.Fatal(err)
			}
		}
		m, err := Join(ctx, slowClaims{st}, Config{Group: g, Member: "m0", Logger: slog.New(slog.DiscardHandler),
			Handler: func(c *Claim) error { <-c.Context().Done(); return nil }})
		if err != nil {
			t.Fatal(err)
		}
		for len(m.Owned()) < parts/members {
			time.Sleep(10 * time.Millisecond)
			synctest.Wait()
		}
		before := m.planner.full.Load()

		// The others claim their shares in two halves, 1.5 s apart.
		snap, err := st.Snapshot(ctx, g)
		if err != nil {
			t.Fatal(err)
		}
		in := balance.Input{}
		for _, s := range snap.Sessions {
			in.Members = append(in.Members, balance.Member{ID: s.ID, Weight: s.Weight})
		}
		for _, p := range ps {
			in.Partitions = append(in.Partitions, balance.Partition{ID: p.ID})
		}
		shares, target := map[string][]string{}, balance.Assign(in)
		for _, p := range ps {
			if s := target[p.ID]; s != m.Session() {
				shares[s] = append(shares[s], p.ID)
			}
		}
		for half := range 2 {
			for s, share := range shares {
				n := len(share) / 2
				if _, err := st.ClaimBatch(ctx, g, s, share[half*n:][:n+half*(len(share)-2*n)]); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(1500 * time.Millisecond)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if n := m.planner.full.Load() - before; n != 0 {
			t.Errorf("m0 planned in full %d more times while the others carried out its target with a pause of 1.5 s; want none", n)
		}
		cancel()
		<-m.Done()
	})
}
