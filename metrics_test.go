package herd_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/faultstore"
	"github.com/herdhq/herd/store/memstore"
)

// metric returns the value of the series name{member=member, labels...}
// in reg (a histogram's sample count), and whether it exists.
func metric(t *testing.T, reg prometheus.Gatherer, name, member string, labels ...string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			if got["member"] != member || got["group"] != "g" {
				continue
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if got[labels[i]] != labels[i+1] {
					continue series
				}
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				return m.GetCounter().GetValue(), true
			case dto.MetricType_GAUGE:
				return m.GetGauge().GetValue(), true
			case dto.MetricType_HISTOGRAM:
				return float64(m.GetHistogram().GetSampleCount()), true
			}
		}
	}
	return 0, false
}

// want checks metrics of one member: each entry is "name{k=v} op value"
// with op one of == and >=.
func want(t *testing.T, reg prometheus.Gatherer, when, member string, checks ...string) {
	t.Helper()
	for _, c := range checks {
		var series, op string
		var v float64
		if _, err := fmt.Sscanf(c, "%s %s %g", &series, &op, &v); err != nil {
			t.Fatalf("bad check %q: %v", c, err)
		}
		name, rest, _ := strings.Cut(series, "{")
		var labels []string
		if rest != "" {
			k, val, _ := strings.Cut(strings.TrimSuffix(rest, "}"), "=")
			labels = []string{k, val}
		}
		got, ok := metric(t, reg, name, member, labels...)
		if !ok || (op == "==" && got != v) || (op == ">=" && got < v) {
			t.Errorf("%s: member %s: %s = %v (present %v); want %s %v", when, member, series, got, ok, op, v)
		}
	}
}

// The metrics of members on one registry count what happens to them: a's
// claims, b's join (a hands off half), a cut from the store (failed
// renewals and store errors, a fenced session whose partitions are lost and
// whose handlers' final checkpoints are refused, b takes everything over),
// and a's return (b hands half back). Leaving unregisters them.
func TestMetricsCountMemberEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewPedanticRegistry()
		mem := memstore.New()
		cut := faultstore.Wrap(mem)
		var refused atomic.Int32
		join := func(st store.Store, id string, ps []store.Partition) *herd.Member {
			m, err := herd.Join(t.Context(), st, herd.Config{
				Group: "g", Member: id, Partitions: ps, Metrics: reg, Logger: slog.New(slog.DiscardHandler),
				Handler: func(c *herd.Claim) error {
					<-c.Context().Done()
					// A final checkpoint: taken after a handoff, refused
					// once the session is fenced.
					if err := c.Checkpoint(context.Background(), []byte("done")); err != nil {
						refused.Add(1)
					}
					return nil
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
		a := join(cut, "a", herd.Numbered(8))
		time.Sleep(5 * time.Second) // one renewal at 3.3 s
		want(t, reg, "a alone", "a",
			"herd_claims_total == 8", "herd_partitions_owned == 8", "herd_handlers_running == 8", "herd_session_live == 1",
			"herd_session_renewals_total{result=ok} >= 1", "herd_session_renewal_duration_seconds >= 1",
			"herd_rebalance_duration_seconds == 1", "herd_handoffs_total == 0", "herd_losses_total == 0",
			"herd_store_errors_total{op=keep_alive} == 0", "herd_fencing_rejections_total{reason=fenced} == 0")
		if !a.SessionLive() {
			t.Error("a.SessionLive() = false with a live session")
		}

		b := join(mem, "b", nil)
		time.Sleep(5 * time.Second)
		want(t, reg, "b joined", "a", "herd_handoffs_total == 4", "herd_partitions_owned == 4", "herd_rebalance_duration_seconds == 2")
		want(t, reg, "b joined", "b", "herd_claims_total == 4", "herd_partitions_owned == 4")

		cut.SetCut(true) // a fences itself at 9 s, its session expires at 10 s
		time.Sleep(15 * time.Second)
		want(t, reg, "a cut off", "a",
			"herd_sessions_lost_total == 1", "herd_losses_total == 4", "herd_partitions_owned == 0", "herd_session_live == 0",
			"herd_session_renewals_total{result=failed} >= 1", "herd_store_errors_total{op=keep_alive} >= 1",
			"herd_store_errors_total{op=open_session} >= 1", "herd_fencing_rejections_total{reason=fenced} == 4")
		want(t, reg, "a cut off", "b", "herd_claims_total == 8", "herd_partitions_owned == 8")
		if a.SessionLive() {
			t.Error("a.SessionLive() = true while it is cut off from the store")
		}
		if n := refused.Load(); n != 4 {
			t.Errorf("%d final checkpoints refused; want a's 4", n)
		}

		cut.SetCut(false) // a opens a new session, waits SessionTTL (holdAfterLoss), and takes its share back
		time.Sleep(20 * time.Second)
		want(t, reg, "a back", "a", "herd_session_live == 1", "herd_partitions_owned == 4", "herd_claims_total == 12")
		want(t, reg, "a back", "b", "herd_handoffs_total == 4", "herd_partitions_owned == 4")

		if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
			t.Errorf("metric lint: %v %v", problems, err)
		}
		for _, m := range []*herd.Member{a, b} {
			if err := m.Leave(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		if a.SessionLive() {
			t.Error("a.SessionLive() = true after Leave")
		}
		if n, err := testutil.GatherAndCount(reg); err != nil || n != 0 {
			t.Errorf("%d series left after every member left (%v); want none", n, err)
		}
	})
}

// A second member with the same group and member id on one registerer is
// refused with a clear error, not a panic; once the first has left, the id
// can join again.
func TestMetricsSameMemberTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		st := memstore.New()
		cfg := herd.Config{Group: "g", Member: "a", Partitions: herd.Numbered(2), Metrics: reg,
			Logger: slog.New(slog.DiscardHandler), Handler: func(c *herd.Claim) error { <-c.Context().Done(); return nil }}
		first, err := herd.Join(t.Context(), st, cfg)
		if err != nil {
			t.Fatal(err)
		}
		_, err = herd.Join(t.Context(), st, cfg)
		var are prometheus.AlreadyRegisteredError
		if err == nil || !errors.As(err, &are) || !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), "Config.Member") {
			t.Fatalf("second Join of member a on one registerer: %v; want an error saying the metrics are already registered", err)
		}
		other := cfg
		other.Member = "b"
		second, err := herd.Join(t.Context(), st, other)
		if err != nil {
			t.Fatalf("member b on the same registerer: %v", err)
		}
		if err := first.Leave(t.Context()); err != nil {
			t.Fatal(err)
		}
		again, err := herd.Join(t.Context(), st, cfg)
		if err != nil {
			t.Fatalf("member a joining again after leaving: %v", err)
		}
		time.Sleep(time.Second)
		want(t, reg, "a again", "a", "herd_claims_total == 1")
		for _, m := range []*herd.Member{second, again} {
			if err := m.Leave(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// A partition taken over behind the member's back (its record released and
// claimed by another session, as after a lapse the member did not notice):
// the handler's checkpoint is rejected by the store (not_owner), and the
// member's next read counts the partition lost.
func TestMetricsNotOwnerAndLoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		st := memstore.New()
		claims := make(chan *herd.Claim, 1)
		a, err := herd.Join(t.Context(), st, herd.Config{
			Group: "g", Member: "a", Partitions: herd.Numbered(1), Metrics: reg, Logger: slog.New(slog.DiscardHandler),
			Handler: func(c *herd.Claim) error { claims <- c; <-c.Context().Done(); return nil },
		})
		if err != nil {
			t.Fatal(err)
		}
		c := <-claims
		ctx := t.Context()
		if err := store.Release(ctx, st, "g", c.Partition, a.Session(), c.Epoch); err != nil {
			t.Fatal(err)
		}
		other, err := st.OpenSession(ctx, "g", "intruder", 1, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.Claim(ctx, st, "g", c.Partition, other); err != nil {
			t.Fatal(err)
		}
		if err := c.Checkpoint(ctx, []byte("stale")); !errors.Is(err, herd.ErrNotOwner) {
			t.Fatalf("checkpoint after the takeover: %v; want ErrNotOwner", err)
		}
		// Wake a: it reads the group and finds the record taken.
		if err := a.SetPartitions(ctx, herd.Numbered(1)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		want(t, reg, "taken over", "a", "herd_fencing_rejections_total{reason=not_owner} == 1",
			"herd_fencing_rejections_total{reason=fenced} == 0", "herd_losses_total == 1", "herd_partitions_owned == 0",
			"herd_store_errors_total{op=checkpoint} == 0")
		if err := a.Leave(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
