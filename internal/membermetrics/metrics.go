// Package membermetrics is a herd member's Prometheus metrics (listed in
// docs/operators.md): one collector labelled with group and member,
// registered by Join with Config.Metrics and unregistered when the member
// stops, so that members that come and go leave no stale series. A nil
// *Metrics (no Config.Metrics) is valid: every hook is then a call on nil
// that returns.
//
// Gauges are read at scrape time (the Gauges functions) and store errors
// are counted by a store wrapper (Store), so the member's code carries only
// one-line hooks where it has what they count. Claims, handoffs and losses
// are counted when the step's "rebalanced" line is logged, so counters and
// log agree.
package membermetrics

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/herdhq/herd/store"
)

// Gauges are read at scrape time.
type Gauges struct {
	Owned    func() float64 // partitions owned and run
	Handlers func() float64 // handlers that have not returned
	Live     func() float64 // 1 while the session is live
	Load     func() float64 // the sum of the measured loads of the partitions run
}

// Metrics is one member's collector.
type Metrics struct {
	reg    prometheus.Registerer
	fenced error // the member's ErrFenced, counted as fenced by CountFencing

	owned, handlers, live, load      prometheus.GaugeFunc
	claims, handoffs, losses, lostSS prometheus.Counter
	rebalance, renewSeconds          prometheus.Histogram
	renewals, fencing, storeErrors   *prometheus.CounterVec
}

// Store operations, the values of herd_store_errors_total's op label.
const (
	opOpenSession   = "open_session"
	opKeepAlive     = "keep_alive"
	opCloseSession  = "close_session"
	opSetPartitions = "set_partitions"
	opSnapshot      = "snapshot"
	opGiveBack      = "give_back"
	opCheckpoint    = "checkpoint"
	opRestore       = "restore"
	opChanges       = "changes"
	opExpire        = "expire_sessions"
	opClaimBatch    = "claim_batch"
	opReleaseBatch  = "release_batch"
	opReportLoads   = "report_loads"
)

var storeOps = []string{opOpenSession, opKeepAlive, opCloseSession, opSetPartitions, opSnapshot,
	opGiveBack, opCheckpoint, opRestore, opChanges, opExpire, opClaimBatch, opReleaseBatch, opReportLoads}

// New creates a member's metrics (not registered); fenced is the error a
// write refused for the session's fence time wraps.
func New(group, member string, fenced error, g Gauges) *Metrics {
	labels := prometheus.Labels{"group": group, "member": member}
	gauge := func(name, help string, f func() float64) prometheus.GaugeFunc {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels}, f)
	}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels})
	}
	vec := func(name, help, label string, values ...string) *prometheus.CounterVec {
		v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels}, []string{label})
		for _, x := range values {
			v.WithLabelValues(x) // every series shows from the start, at 0
		}
		return v
	}
	histogram := func(name, help string, buckets []float64) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, ConstLabels: labels, Buckets: buckets})
	}
	return &Metrics{
		fenced:   fenced,
		owned:    gauge("herd_partitions_owned", "Partitions the member owns and runs a handler for.", g.Owned),
		handlers: gauge("herd_handlers_running", "Handlers that have not returned, those being handed off included.", g.Handlers),
		live:     gauge("herd_session_live", "1 while the member holds a live session that is not past its fence time, else 0.", g.Live),
		load: gauge("herd_member_load", "Sum of the measured loads of the partitions the member runs (Claim.ReportLoad's unit, or progress marks per second); 0 if it measures none.",
			g.Load),
		claims:   counter("herd_claims_total", "Partitions claimed."),
		handoffs: counter("herd_handoffs_total", "Partitions handed off to another member (a rebalance or Leave)."),
		losses:   counter("herd_losses_total", "Partitions lost without a handoff: taken over by another member, or dropped with a lost or fenced session."),
		lostSS:   counter("herd_sessions_lost_total", "Sessions lost: expired in the store, or fenced by the member because it could not renew in time."),
		rebalance: histogram("herd_rebalance_duration_seconds", "Time from a rebalance step's first claim, handoff or loss to its last.",
			[]float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}),
		renewSeconds: histogram("herd_session_renewal_duration_seconds", "Time each session renewal took, whatever its result.",
			[]float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}),
		renewals: vec("herd_session_renewals_total", "Session renewals by result: ok, expired (the store no longer had the session), failed (error or timeout).",
			"result", "ok", "expired", "failed"),
		fencing: vec("herd_fencing_rejections_total", "Checkpoint writes refused: not_owner (the store rejected the claim's epoch), fenced (the session was past its fence time, lost or fenced).",
			"reason", "not_owner", "fenced"),
		storeErrors: vec("herd_store_errors_total", "Store calls that failed, by operation (expected outcomes such as a partition already claimed are not errors).",
			"op", storeOps...),
	}
}

func (mm *Metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{mm.owned, mm.handlers, mm.live, mm.load, mm.claims, mm.handoffs, mm.losses, mm.lostSS,
		mm.rebalance, mm.renewSeconds, mm.renewals, mm.fencing, mm.storeErrors}
}

// Describe and Collect make the member's metrics one prometheus.Collector,
// registered and unregistered in one call.
func (mm *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range mm.collectors() {
		c.Describe(ch)
	}
}

func (mm *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range mm.collectors() {
		c.Collect(ch)
	}
}

// Register registers the metrics with reg (the registerer's error as is).
func (mm *Metrics) Register(reg prometheus.Registerer) error {
	if err := reg.Register(mm); err != nil {
		return err
	}
	mm.reg = reg
	return nil
}

// Unregister removes the metrics from their registerer. Called when the
// member stops, before Done is closed.
func (mm *Metrics) Unregister() {
	if mm != nil && mm.reg != nil {
		mm.reg.Unregister(mm)
	}
}

// Step counts a rebalance step that has just been logged: claimed,
// handed off and lost partitions, from start.
func (mm *Metrics) Step(claimed, handoff, lost int, start time.Time) {
	if mm == nil {
		return
	}
	mm.claims.Add(float64(claimed))
	mm.handoffs.Add(float64(handoff))
	mm.losses.Add(float64(lost))
	mm.rebalance.Observe(time.Since(start).Seconds())
}

// SessionLost counts a lost session and the owned partitions it had.
func (mm *Metrics) SessionLost(owned int) {
	if mm == nil {
		return
	}
	mm.lostSS.Inc()
	mm.losses.Add(float64(owned))
}

// Leaving counts the owned partitions a Leave hands off.
func (mm *Metrics) Leaving(owned int) {
	if mm == nil {
		return
	}
	mm.handoffs.Add(float64(owned))
}

// CountFencing returns write, counting the writes it refuses for fencing:
// the store's ErrNotOwner, and the member's fenced error.
func (mm *Metrics) CountFencing(write func(context.Context, []byte) error) func(context.Context, []byte) error {
	if mm == nil {
		return write
	}
	return func(ctx context.Context, v []byte) error {
		err := write(ctx, v)
		switch {
		case errors.Is(err, mm.fenced):
			mm.fencing.WithLabelValues("fenced").Inc()
		case errors.Is(err, store.ErrNotOwner):
			mm.fencing.WithLabelValues("not_owner").Inc()
		}
		return err
	}
}

// Renewed counts a session renewal that took took and returned err, unless
// ctx (the session's) was cancelled: then the member dropped the session.
func (mm *Metrics) Renewed(ctx context.Context, took time.Duration, err error) {
	if mm == nil || (err != nil && errors.Is(ctx.Err(), context.Canceled)) {
		return
	}
	result := "ok"
	switch {
	case err == nil:
	case errors.Is(err, store.ErrSessionExpired):
		result = "expired"
	default:
		result = "failed"
	}
	mm.renewals.WithLabelValues(result).Inc()
	mm.renewSeconds.Observe(took.Seconds())
	mm.storeErr(ctx, opKeepAlive, err)
}

// storeErr counts a failed store call, unless its error is an outcome the
// member expects or the caller cancelled it, and returns err.
func (mm *Metrics) storeErr(ctx context.Context, op string, err error) error {
	if err == nil || errors.Is(err, store.ErrClaimed) || errors.Is(err, store.ErrNotOwner) ||
		errors.Is(err, store.ErrSessionExpired) || errors.Is(ctx.Err(), context.Canceled) {
		return err
	}
	mm.storeErrors.WithLabelValues(op).Inc()
	return err
}
