package herd

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/memstore"
)

// entryReads counts the log reads (Changes calls) that returned entries.
type entryReads struct {
	store.Store
	mu sync.Mutex
	n  int
}

func (s *entryReads) Changes(ctx context.Context, group string, after store.Version, max int) ([]store.Change, store.Version, error) {
	cs, v, err := s.Store.Changes(ctx, group, after, max)
	if err == nil && len(cs) > 0 {
		s.mu.Lock()
		s.n++
		s.mu.Unlock()
	}
	return cs, v, err
}

func (s *entryReads) reads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// The members of a fleet report their loads at the same moments, one
// after the other: a follower that read load reports only waits a second
// (loadGather) before its next read, so that 16 members' reports, 10 ms
// apart, cost it two log reads (and one plan), not 16.
func TestLoadReportsReadTogether(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const reporters = 16
		ctx := t.Context()
		mem := memstore.New()
		st := &entryReads{Store: mem}
		sessions := make([]string, reporters)
		for i := range sessions {
			id, err := mem.OpenSession(ctx, "g", "r"+strconv.Itoa(i), 1, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			sessions[i] = id
		}
		m, err := Join(ctx, st, Config{Group: "g", Member: "follower", Partitions: Numbered(reporters),
			Handler: func(c *Claim) error { <-c.Context().Done(); return nil }, LoadReportInterval: -1,
			Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute) // placed: the follower runs its share
		synctest.Wait()
		before := st.reads()
		for i, s := range sessions {
			// Equal loads: the plan stays the count balance, and no
			// claim or release adds entries to the log.
			if err := mem.ReportLoads(ctx, "g", s, []store.Load{{Partition: strconv.Itoa(i), Load: 1}}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		reads := st.reads() - before
		if _, ok := m.rep.loadOf(strconv.Itoa(reporters - 1)); !ok {
			t.Errorf("the follower's copy has no load of partition %d, the last reported", reporters-1)
		}
		if reads > 2 {
			t.Errorf("the follower read the log %d times for %d load reports 10 ms apart; want at most 2", reads, reporters)
		}
		if err := m.Leave(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
