package sim

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/memstore"
)

// shufflingStore returns every snapshot with its sessions, partitions and
// records in random order (and one record duplicated), breaking the store
// contract's promise of sorted lists: herd's members must sort a copy and
// behave as with a sorted snapshot.
type shufflingStore struct {
	store.Store
	mu  sync.Mutex // guards rng, shared by the members
	rng *rand.Rand
}

func (s *shufflingStore) Snapshot(ctx context.Context, group string) (*store.Snapshot, error) {
	snap, err := s.Store.Snapshot(ctx, group)
	if err != nil {
		return nil, err
	}
	out := &store.Snapshot{Sessions: slices.Clone(snap.Sessions), Partitions: slices.Clone(snap.Partitions), Owners: slices.Clone(snap.Owners), PartitionSetStored: snap.PartitionSetStored, Version: snap.Version}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rng.Shuffle(len(out.Sessions), func(i, j int) { out.Sessions[i], out.Sessions[j] = out.Sessions[j], out.Sessions[i] })
	s.rng.Shuffle(len(out.Partitions), func(i, j int) { out.Partitions[i], out.Partitions[j] = out.Partitions[j], out.Partitions[i] })
	s.rng.Shuffle(len(out.Owners), func(i, j int) { out.Owners[i], out.Owners[j] = out.Owners[j], out.Owners[i] })
	if len(out.Owners) > 0 {
		// A stale duplicate first: the later (current) record must win.
		stale := out.Owners[len(out.Owners)-1]
		stale.Session, stale.Epoch = "", stale.Epoch-1
		out.Owners = append([]store.Ownership{stale}, out.Owners...)
	}
	return out, nil
}

// TestHerdUnsortedSnapshot runs herd members on a store that returns
// unsorted snapshots and requires the same fair spread, and a takeover
// after a crash.
func TestHerdUnsortedSnapshot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		st := &shufflingStore{Store: memstore.New(), rng: rand.New(rand.NewPCG(1, 2))}
		var ms []*herd.Member
		var cancels []context.CancelFunc
		for i := range 4 {
			mctx, mcancel := context.WithCancel(ctx)
			m, err := herd.Join(mctx, st, herd.Config{
				Group: "g", Member: MemberID(i), Partitions: PartitionSet(32), Logger: slog.New(slog.DiscardHandler),
				Handler: func(c *herd.Claim) error { <-c.Context().Done(); return nil },
			})
			if err != nil {
				t.Fatal(err)
			}
			ms, cancels = append(ms, m), append(cancels, mcancel)
		}
		check := func(live []*herd.Member, want int) {
			t.Helper()
			seen := map[string]string{}
			for _, m := range live {
				owned := m.Owned()
				if len(owned) < want || len(owned) > want+1 {
					t.Errorf("%s owns %d partitions, want %d or %d", m.ID(), len(owned), want, want+1)
				}
				for _, p := range owned {
					if other, dup := seen[p]; dup {
						t.Errorf("partition %s run by %s and %s", p, other, m.ID())
					}
					seen[p] = m.ID()
				}
			}
			if len(seen) != 32 {
				t.Errorf("%d partitions run, want 32", len(seen))
			}
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		check(ms, 8)
		cancels[3]() // crash
		<-ms[3].Done()
		time.Sleep(herd.DefaultSessionTTL + 2*time.Second)
		synctest.Wait()
		check(ms[:3], 10)
		cancel()
		for _, m := range ms {
			<-m.Done()
		}
	})
}
