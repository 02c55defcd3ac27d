package herd

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/memstore"
)

// claimCount is a store that counts the partitions claimed.
type claimCount struct {
	store.Store
	n atomic.Int64
}

func (s *claimCount) ClaimBatch(ctx context.Context, group, session string, ps []string) ([]store.ClaimResult, error) {
	res, err := s.Store.ClaimBatch(ctx, group, session, ps)
	for _, r := range res {
		if r.Err == nil {
			s.n.Add(1)
		}
	}

	return res, err
}

// TestJoinBurstPlacesOnce: a fleet whose processes start over 2 s on a busy
// host, joins a mean of 20 ms apart with pauses of up to 180 ms between two
// (as 100 processes on two cores did: herd bench --scenario large on
// Redis), places the partitions once: no partition is claimed twice, and
// each member plans in full a few times, not once per pause.
func TestJoinBurstPlacesOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const members, parts = 100, 4000
		st := &claimCount{Store: memstore.New()}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		var (
			mu sync.Mutex
			ms []*Member
			wg sync.WaitGroup
		)
		for i := range members {
			gap := 12 * time.Millisecond
			if i%17 == 5 {
				gap = 180 * time.Millisecond
			}
			time.Sleep(gap)
			wg.Go(func() {
				m, err := Join(ctx, st, Config{
					Group: "g", Member: fmt.Sprintf("m%03d", i), Partitions: Numbered(parts),
					Handler: func(c *Claim) error { <-c.Context().Done(); return nil },
					Logger:  slog.New(slog.DiscardHandler),
				})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				ms = append(ms, m)
				mu.Unlock()
			})
		}
		wg.Wait()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		owned, most := 0, 0
		for _, m := range ms {
			owned += len(m.Owned())
		}
		if owned != parts {
			t.Fatalf("%d partitions run, want %d", owned, parts)
		}
		if n := st.n.Load(); n != parts {
			t.Errorf("%d claims for %d partitions: %d moved", n, parts, n-parts)
		}
		cancel()
		for _, m := range ms {
			<-m.Done()
			most = max(most, int(m.planner.full.Load()))
		}
		t.Logf("a member planned in full %d times", most)
		if most > 2 {
			t.Errorf("a member planned in full %d times; want at most 2", most)
		}
	})
}

// TestCrashesPlannedTogether: members that crash together expire over up
// to RenewInterval (each after its last renewal), one after the other;
// the others plan for all of them at once, not once per expiry (a session
// that missed a renewal is waited for: expirySettle), and still run every
// partition again within SessionTTL + 1 s of the crash.
func TestCrashesPlannedTogether(t *testing.T) {
	synctest.Test(t, func(t *testing.T) { crashTogether(t, memstore.New()) })
}

// slowLog is a store whose log brings entries 200 ms late, as a busy one.
type slowLog struct{ store.Store }

func (s slowLog) Changes(ctx context.Context, group string, after store.Version, max int) ([]store.Change, store.Version, error) {
	cs, v, err := s.Store.Changes(ctx, group, after, max)
	if len(cs) == 0 {
		return cs, v, err
	}
	select {
	case <-ctx.Done():
		return nil, after, ctx.Err()
	case <-time.After(200 * time.Millisecond):
		return cs, v, err
	}
}

// TestCrashesPlannedOnSlowLog: as TestCrashesPlannedTogether, on a log
// that brings the last crashed session's expiry after the settle time:
// the members plan once, not first on a copy without it.
func TestCrashesPlannedOnSlowLog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) { crashTogether(t, slowLog{memstore.New()}) })
}

// crashTogether has 100 members join st, 10 of them crash together, and
// checks that the others run every partition again within SessionTTL + 1
// s of the crash, each planning in full once for it.
func crashTogether(t *testing.T, st store.Store) {
	const members, parts = 100, 4000
	var ms []*Member
	var cancels []context.CancelFunc
	for i := range members {
		ctx, cancel := context.WithCancel(t.Context())
		m, err := Join(ctx, st, Config{
			Group: "g", Member: fmt.Sprintf("m%03d", i), Partitions: Numbered(parts),
			Handler: func(c *Claim) error { <-c.Context().Done(); return nil },
			Logger:  slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatal(err)
		}
		ms, cancels = append(ms, m), append(cancels, cancel)
		time.Sleep(DefaultSessionTTL / 3 / members) // renewals spread over RenewInterval
	}
	time.Sleep(10 * time.Second)
	synctest.Wait()
	before := make([]int, members)
	for i, m := range ms {
		before[i] = int(m.planner.full.Load())
	}
	crash := time.Now()
	for i := 0; i < members; i += 10 {
		cancels[i]()
		<-ms[i].Done()
	}
	var took time.Duration
	for took == 0 {
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		owned := 0
		for i, m := range ms {
			if i%10 != 0 {
				owned += len(m.Owned())
			}
		}
		if owned == parts {
			took = time.Since(crash)
		}
		if time.Since(crash) > 2*DefaultSessionTTL {
			t.Fatalf("%d of %d partitions run 20 s after the crash", owned, parts)
		}
	}
	time.Sleep(5 * time.Second)
	synctest.Wait()
	most := 0
	for i, m := range ms {
		if i%10 != 0 {
			cancels[i]()
			<-m.Done()
			most = max(most, int(m.planner.full.Load())-before[i])
		}
	}
	t.Logf("every partition ran again %v after the crash; a member planned in full %d times", took, most)
	if took > DefaultSessionTTL+time.Second {
		t.Errorf("every partition ran again %v after the crash; want within TTL + 1 s", took)
	}
	if most > 1 {
		t.Errorf("a member planned in full %d times after 10 crashed together; want 1", most)
	}
}
