package herd

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/herdhq/herd/store/memstore"
)

// TestSpreadJoinsPlannedTogether: 10 members joining a placed fleet of
// 100 one after the other, 300 ms apart (more than JoinSettle: as 10
// processes started at once open their sessions on a busy host), are
// planned for by the others in a few full plans, not one per join (each
// costs every member a pass over the partitions, and hands off toward a
// membership about to change again), and the fleet is balanced within
// 5 s of the last join with no partition moved twice.
func TestSpreadJoinsPlannedTogether(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const members, joiners, parts = 100, 10, 4000
		st := &claimCount{Store: memstore.New()}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		join := func(i int) *Member {
			m, err := Join(ctx, st, Config{
				Group: "g", Member: fmt.Sprintf("m%03d", i), Partitions: Numbered(parts),
				Handler: func(c *Claim) error { <-c.Context().Done(); return nil },
				Logger:  slog.New(slog.DiscardHandler),
			})
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
		var ms []*Member
		for i := range members {
			ms = append(ms, join(i))
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		before := make([]int, members)
		for i, m := range ms {
			before[i] = int(m.planner.full.Load())
		}
		placed := st.n.Load()
		for i := range joiners {
			ms = append(ms, join(members+i))
			time.Sleep(300 * time.Millisecond)
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		for i, m := range ms {
			if n := len(m.Owned()); n < parts/(members+joiners) || n > parts/(members+joiners)+1 {
				t.Errorf("member %d runs %d partitions, want %d or %d", i, n, parts/(members+joiners), parts/(members+joiners)+1)
			}
		}
		moved := st.n.Load() - placed
		most := 0
		cancel()
		for i, m := range ms {
			<-m.Done()
			if i < members {
				most = max(most, int(m.planner.full.Load())-before[i])
			}
		}
		t.Logf("%d partitions moved; a member of the fleet planned in full %d times for the joins", moved, most)
		// Each joiner takes its share once: 36 or 37 partitions.
		if want := int64(joiners * (parts/(members+joiners) + 1)); moved > want {
			t.Errorf("%d partitions moved for the joins; want at most %d", moved, want)
		}
		if most > 3 {
			t.Errorf("a member of the fleet planned in full %d times for 10 joins; want at most 3", most)
		}
	})
}

// TestJoinGapOfBurst: the gap joinQuiet is given is the longest pause
// between two news of sessions opened in the current burst (a short one
// after it does not shorten the quiet), a pause longer than the burst's
// bound starts a new burst, and a read of the group is no news of a join.
func TestJoinGapOfBurst(t *testing.T) {
	r := &replica{burstWait: time.Second}
	t0 := time.Unix(1000, 0)
	steps := []struct {
		at   time.Duration
		read bool
		want time.Duration
	}{
		{0, false, 0}, // a lone join
		{700 * time.Millisecond, false, 700 * time.Millisecond}, // a second within the bound
		{710 * time.Millisecond, false, 700 * time.Millisecond}, // a short pause keeps the longest
		{900 * time.Millisecond, true, 700 * time.Millisecond},  // a read counts for nothing
		{3 * time.Second, false, 0},                             // after a long pause: a new burst
		{3200 * time.Millisecond, false, 200 * time.Millisecond},
	}
	for i, s := range steps {
		r.sessionNewsAt(t0.Add(s.at), s.read)
		if got := r.lastJoinGap(); got != s.want {
			t.Errorf("step %d: gap %v, want %v", i, got, s.want)
		}
	}
	if q := joinQuiet(100*time.Millisecond, time.Second, 0); q != 100*time.Millisecond {
		t.Errorf("a lone join waits %v, want JoinSettle", q)
	}
	if q := joinQuiet(100*time.Millisecond, time.Second, 200*time.Millisecond); q != 600*time.Millisecond {
		t.Errorf("joins 200 ms apart wait %v, want 600ms", q)
	}
	if q := joinQuiet(100*time.Millisecond, time.Second, 700*time.Millisecond); q != time.Second {
		t.Errorf("joins 700 ms apart wait %v, want the bound, 1s", q)
	}
}
