package herd_test

import (
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/store/memstore"
)

// herd_member_load is the sum of the loads the member measures for the
// partitions it runs (here each handler's own, Claim.ReportLoad), from its
// first report on; there is no series per partition.
func TestMetricsMemberLoad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewPedanticRegistry()
		m, err := herd.Join(t.Context(), memstore.New(), herd.Config{
			Group: "g", Member: "a", Partitions: herd.Numbered(4), Metrics: reg, Logger: slog.New(slog.DiscardHandler),
			LoadReportInterval: time.Second,
			Handler: func(c *herd.Claim) error {
				c.ReportLoad(1.5)
				<-c.Context().Done()
				return nil
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Second)
		want(t, reg, "after reports", "a", "herd_member_load == 6", "herd_store_errors_total{op=report_loads} == 0")
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			for _, s := range mf.GetMetric() {
				for _, l := range s.GetLabel() {
					if l.GetName() == "partition" {
						t.Fatalf("metric %s has a partition label; want per-member series only", mf.GetName())
					}
				}
			}
		}
		if err := m.Leave(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
}
