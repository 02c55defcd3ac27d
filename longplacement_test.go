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

// TestLongPlacementFewFullPlans: while the other members carry out a
// placement over many seconds (every entry progress toward the target), a
// member plans in full a few times, not once per RenewInterval: a full plan
// at the end of a target's life that finds the same target gives the next
// one twice the life.
func TestLongPlacementFewFullPlans(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := longPlacement(t)
		t.Logf("m0 planned in full %d times", n)
		if n > 4 {
			t.Errorf("m0 planned in full %d times while the others placed their shares over 18 s; want at most 4 (its first plans, and the ends of lives that double)", n)
		}
	})
}

// TestOwnPartKeepsTheTarget: as TestLongPlacementFewFullPlans, a member
// whose own part of the target is met plans in full no more while the
// others carry out the rest: a full plan would find the same target.
func TestOwnPartKeepsTheTarget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		if n := longPlacement(t); n != 1 {
			t.Errorf("m0 planned in full %d times while the others placed their shares over 18 s; want 1 (its own placement)", n)
		}
	})
}

// longPlacement has m0 join a group of 1,000 partitions with 9 other
// sessions, place its share, and follow the others placing theirs one
// partition at a time, 20 ms apart; it returns m0's full plans.
func longPlacement(t *testing.T) int64 {
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
	m, err := Join(ctx, st, Config{Group: g, Member: "m0", Logger: slog.New(slog.DiscardHandler),
		Handler: func(c *Claim) error { <-c.Context().Done(); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	synctest.Wait()
	if n := len(m.Owned()); n != parts/members {
		t.Fatalf("m0 runs %d partitions; want %d", n, parts/members)
	}

	// The others claim their shares one partition at a time, 20 ms
	// apart: 900 entries over 18 s (5 x RenewInterval).
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
	target := balance.Assign(in)
	for _, p := range ps {
		if s := target[p.ID]; s != m.Session() {
			if _, err := st.ClaimBatch(ctx, g, s, []string{p.ID}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	time.Sleep(5 * time.Second)
	synctest.Wait()
	cancel()
	<-m.Done()
	return m.planner.full.Load()
}
