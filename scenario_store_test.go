package herd_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/herdtest"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/memstore"
)

// lostClaimStore applies the first claim of each partition and then loses
// its reply, as a connection that drops while the reply is on its way does:
// the store's record names the caller's session, but the caller does not
// run the partition.
type lostClaimStore struct {
	store.Store
	mu   sync.Mutex
	lost map[string]uint64 // partition -> epoch of the claim whose reply was lost
}

// ClaimBatch applies the batch and loses its reply if it holds the first
// claim of a partition.
func (s *lostClaimStore) ClaimBatch(ctx context.Context, g, sess string, ps []string) ([]store.ClaimResult, error) {
	res, err := s.Store.ClaimBatch(ctx, g, sess, ps)
	if err != nil {
		return res, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	lost := false
	for i, r := range res {
		if _, done := s.lost[ps[i]]; r.Err == nil && !done {
			s.lost[ps[i]] = r.Ownership.Epoch
			lost = true
		}
	}
	if lost {
		return nil, fmt.Errorf("lost reply: %w", store.ErrUnavailable)
	}
	return res, nil
}

// TestScenarioClaimOfOwnRecordGetsFreshEpoch: a record naming the member's
// own session that it is not running (here: a Claim whose reply was lost) is
// claimed again at a fresh epoch, never run at the record's old one, and the
// old epoch is fenced.
func TestScenarioClaimOfOwnRecordGetsFreshEpoch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		mem := memstore.New()
		st := &lostClaimStore{Store: mem, lost: map[string]uint64{}}
		var mu sync.Mutex
		running := map[string]uint64{} // partition -> epoch its handler runs at
		m, err := herd.Join(ctx, st, herd.Config{
			Group: "g", Member: "a", Partitions: herd.Numbered(4),
			Logger: slog.New(slog.DiscardHandler),
			Handler: func(c *herd.Claim) error {
				mu.Lock()
				running[c.Partition] = c.Epoch
				mu.Unlock()
				<-c.Context().Done()
				return nil
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Second) // virtual: the member claims, loses replies, claims again
		synctest.Wait()
		mu.Lock()
		got := len(running)
		mu.Unlock()
		if got != 4 {
			t.Fatalf("%d partitions running after 5 s; want 4", got)
		}
		st.mu.Lock()
		lost := st.lost
		st.mu.Unlock()
		for p, old := range lost {
			mu.Lock()
			e := running[p]
			mu.Unlock()
			if e <= old {
				t.Errorf("partition %s runs at epoch %d; the claim whose reply was lost had epoch %d: want a fresh, larger epoch", p, e, old)
			}
			if err := mem.Checkpoint(ctx, "g", p, old, []byte("stale")); !errors.Is(err, store.ErrNotOwner) {
				t.Errorf("checkpoint of %s at the lost claim's epoch %d: %v; want ErrNotOwner", p, old, err)
			}
		}
		if err := m.Leave(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestScenarioEmptiedSetStaysEmpty: a partition set emptied on purpose is
// not mistaken for one the store lost. A member stalled past its TTL while
// running partitions (so it has checkpoints to restore) comes back after the
// set was emptied: it restores nothing of the old set, and the set stays
// empty.
func TestScenarioEmptiedSetStaysEmpty(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		mem := memstore.New()
		gate := &herdtest.Gate{}
		cfg := herd.Config{
			Group: "g", Member: "a", Partitions: herd.Numbered(4),
			Logger: slog.New(slog.DiscardHandler),
			Handler: func(c *herd.Claim) error {
				_ = c.Checkpoint(c.Context(), []byte("progress"))
				<-c.Context().Done()
				return nil
			},
		}
		herdtest.WithGate(&cfg, gate)
		m, err := herd.Join(ctx, mem, cfg)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second) // virtual: the member runs and checkpoints all 4
		synctest.Wait()
		if got := len(m.Owned()); got != 4 {
			t.Fatalf("member runs %d partitions; want 4", got)
		}
		gate.Pause()
		if _, err := mem.SetPartitions(ctx, "g", store.PartitionSet{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(herd.DefaultSessionTTL + 2*time.Second) // the paused member's session expires
		gate.Resume()
		time.Sleep(herd.DefaultSessionTTL) // it notices, opens a new session, reads the group
		synctest.Wait()
		snap, err := mem.Snapshot(ctx, "g")
		if err != nil {
			t.Fatal(err)
		}
		if len(snap.Partitions) != 0 {
			t.Fatalf("the emptied partition set came back as %d partitions after the member lost and reopened its session; want it empty", len(snap.Partitions))
		}
		if m.Session() == "" {
			t.Fatalf("the member has no session after resuming")
		}
		if err := m.Leave(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
