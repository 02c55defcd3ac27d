package jobs_test

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/herdhq/herd/jobs"
	"github.com/herdhq/herd/store"
)

// value returns the value of the series name{member=member, extra...} in
// reg (a histogram's sample count), and whether it exists.
func value(t *testing.T, reg *prometheus.Registry, name, member string, extra ...string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			want := map[string]string{"member": member}
			for i := 0; i+1 < len(extra); i += 2 {
				want[extra[i]] = extra[i+1]
			}
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if got[k] != v {
					continue series
				}
			}
			return metricValue(m), true
		}
	}
	return 0, false
}

func metricValue(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return 0
}

// The jobs metrics count runs by result, failures, takeovers and lateness,
// beside the member's herd metrics, and go when the member stops.
func TestMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		reg := prometheus.NewRegistry()
		f := newFleet(t, ctx, jobs.Config{Every: 10 * time.Minute, RetryDelay: time.Hour, Metrics: reg})
		f.runFor = func(string, jobs.Run) time.Duration { return 3 * time.Minute }
		f.fail = func(r jobs.Run) error {
			if r.Key == "k000" {
				return errors.New("feed down")
			}
			return nil
		}
		f.start(1, keys("k", 20))
		f.start(1, nil)
		time.Sleep(25 * time.Minute)
		var crashed map[string]jobs.Run
		for len(crashed) == 0 {
			time.Sleep(10 * time.Second)
			crashed = f.runningOn("m1")
		}
		f.crash("m1")
		if _, ok := value(t, reg, "herd_jobs_runs_total", "m1", "result", "ok"); ok {
			t.Error("the crashed member's jobs metrics are still registered")
		}
		time.Sleep(time.Minute)

		ok, _ := value(t, reg, "herd_jobs_runs_total", "m2", "result", "ok")
		bad, _ := value(t, reg, "herd_jobs_runs_total", "m2", "result", "error")
		if _, dup := value(t, reg, "herd_jobs_failures_total", "m2"); dup {
			t.Error("herd_jobs_failures_total is exported; failures are herd_jobs_runs_total{result=\"error\"}")
		}
		takeovers, _ := value(t, reg, "herd_jobs_takeovers_total", "m2")
		late, _ := value(t, reg, "herd_jobs_lateness_seconds", "m2")
		running, _ := value(t, reg, "herd_jobs_running", "m2")
		if ok < 10 || bad < 1 || takeovers != float64(len(crashed)) || late < ok || running < float64(len(crashed)) {
			t.Errorf("m2: runs ok %v, error %v, takeovers %v (crashed runs %d), lateness samples %v, running %v",
				ok, bad, takeovers, len(crashed), late, running)
		}
		if _, found := value(t, reg, "herd_partitions_owned", "m2"); !found {
			t.Error("the member's herd metrics are not registered")
		}
		f.leaveAll()
		if mfs, _ := reg.Gather(); len(mfs) != 0 {
			t.Errorf("%d metric families left after every member left", len(mfs))
		}
	})
}

// A second member of the same group and id on one registerer is refused,
// with an error that says why.
func TestMetricsTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		reg := prometheus.NewRegistry()
		f := newFleet(t, ctx, jobs.Config{Every: time.Minute, Metrics: reg})
		f.start(1, []string{"k"})
		cfg := f.cfg
		cfg.Store, cfg.Group, cfg.Member, cfg.Run = f.st, f.group, "m1", f.run("m1")
		_, err := jobs.Start(ctx, cfg)
		if !errors.Is(err, store.ErrInvalid) {
			t.Errorf("second Start with the same member id: %v", err)
		}
		f.leaveAll()
	})
}
