package jobs

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/herdhq/herd/store"
)

// The jobs metrics of a member, registered with Config.Metrics as one
// collector beside the member's herd metrics, every series labelled with
// group and member, and unregistered when the member stops. With
// Config.Metrics nil nothing is created and every hook is a no-op. Failed
// runs are herd_jobs_runs_total{result="error"} (there is no separate
// failures counter).
//
//	name                          type       labels   meaning
//	herd_jobs_runs_total          counter    result   runs ended: result="ok", "error" (timeouts and panics included),
//	                                                  "interrupted"
//	herd_jobs_takeovers_total     counter             keys found running at an older epoch (the owner stopped
//	                                                  mid-run), whose slot this member runs again at once
//	herd_jobs_missed_slots_total  counter             slots that never started because a later slot was already due
//	herd_jobs_skewed_records_total counter            records found with a slot ahead of this member's clock by more
//	                                                  than Config.ClockSkew (their writer's clock was ahead)
//	herd_jobs_running             gauge               runs under way
//	herd_jobs_lateness_seconds    histogram           start minus due time of first attempts (retries and takeovers
//	                                                  are not counted: their lateness is on purpose)
type metrics struct {
	reg       prometheus.Registerer
	runs      *prometheus.CounterVec
	takeovers prometheus.Counter
	missed    prometheus.Counter
	skewed    prometheus.Counter
	running   prometheus.Gauge
	lateness  prometheus.Histogram
}

// LatenessBuckets are the upper bounds of herd_jobs_lateness_seconds.
var LatenessBuckets = []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}

func newMetrics(reg prometheus.Registerer, group, member string) (*metrics, error) {
	if reg == nil {
		return nil, nil
	}
	labels := prometheus.Labels{"group": group, "member": member}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels})
	}
	mm := &metrics{
		reg: reg,
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "herd_jobs_runs_total",
			Help: "Runs ended, by result: ok, error (timeouts and panics included), interrupted (handed off mid-run).", ConstLabels: labels}, []string{"result"}),
		takeovers: counter("herd_jobs_takeovers_total", "Keys found running at an older epoch (their owner stopped mid-run), run again at once."),
		missed:    counter("herd_jobs_missed_slots_total", "Slots that never started because a later slot was already due."),
		skewed:    counter("herd_jobs_skewed_records_total", "Records found with a slot ahead of this member's clock by more than the tolerance (their writer's clock was ahead)."),
		running: prometheus.NewGauge(prometheus.GaugeOpts{Name: "herd_jobs_running",
			Help: "Runs under way.", ConstLabels: labels}),
		lateness: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "herd_jobs_lateness_seconds",
			Help: "Start minus due time of first attempts.", ConstLabels: labels, Buckets: LatenessBuckets}),
	}
	for _, r := range []string{ResultOK, ResultError, ResultInterrupted} {
		mm.runs.WithLabelValues(r)
	}
	if err := reg.Register(mm); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			return nil, fmt.Errorf("jobs: the jobs metrics of group %q and member %q are already registered "+
				"(two members of one process need distinct Member ids): %w: %w", group, member, err, store.ErrInvalid)
		}
		return nil, fmt.Errorf("jobs: registering metrics: %w", err)
	}
	return mm, nil
}

func (mm *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{mm.runs, mm.takeovers, mm.missed, mm.skewed, mm.running, mm.lateness}
}

// Describe and Collect make the metrics one collector.
func (mm *metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range mm.collectors() {
		c.Describe(ch)
	}
}

func (mm *metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range mm.collectors() {
		c.Collect(ch)
	}
}

func (mm *metrics) unregister() {
	if mm != nil {
		mm.reg.Unregister(mm)
	}
}

func (mm *metrics) started(lateSeconds float64, firstAttempt bool) {
	if mm == nil {
		return
	}
	mm.running.Inc()
	if firstAttempt {
		mm.lateness.Observe(max(lateSeconds, 0))
	}
}

func (mm *metrics) ended(result string) {
	if mm == nil {
		return
	}
	mm.running.Dec()
	mm.runs.WithLabelValues(result).Inc()
}

func (mm *metrics) tookOver() {
	if mm != nil {
		mm.takeovers.Inc()
	}
}

func (mm *metrics) skipped(n uint64) {
	if mm != nil && n > 0 {
		mm.missed.Add(float64(n))
	}
}

func (mm *metrics) skew() {
	if mm != nil {
		mm.skewed.Inc()
	}
}
