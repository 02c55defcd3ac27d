package herd

import (
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/memstore"
)

// TestEqualLoadReportsKeepTheTarget: a load report that leaves the group's
// published loads all equal leaves the plan the count balance, so the
// members plan nothing in full for it; one that makes them differ makes
// each plan in full, to balance by load. Members that moved partitions
// report at the same moments (a full plan each per report, every member:
// 20 to 50 ms of CPU on 100,000 partitions).
func TestEqualLoadReportsKeepTheTarget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		mem := memstore.New()
		var ms []*Member
		for _, id := range []string{"a", "b"} {
			m, err := Join(ctx, mem, Config{Group: "g", Member: id, Partitions: Numbered(8), LoadReportInterval: -1,
				Handler: func(c *Claim) error { <-c.Context().Done(); return nil }, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			ms = append(ms, m)
		}
		time.Sleep(time.Minute) // placed, and every target's life over
		synctest.Wait()
		full := func() (n int64) {
			for _, m := range ms {
				n += m.planner.full.Load()
			}
			return n
		}
		report := func(m *Member, load float64) {
			t.Helper()
			var loads []store.Load
			for _, p := range m.Owned() {
				loads = append(loads, store.Load{Partition: p, Load: load})
			}
			if err := mem.ReportLoads(ctx, "g", m.Session(), loads); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Minute)
			synctest.Wait()
		}
		before := full()
		report(ms[0], 1)
		report(ms[1], 1)
		if n := full() - before; n != 0 {
			t.Errorf("%d full plans for reports of equal loads; want none", n)
		}
		before = full()
		report(ms[0], 3)
		if n := full() - before; n < 2 {
			t.Errorf("%d full plans for a report that made the loads differ; want one per member", n)
		}
		for _, m := range ms {
			if n := len(m.Owned()); n == 0 {
				t.Errorf("%s runs nothing", m.ID())
			}
			if err := m.Leave(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
}
