package herd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/herdhq/herd/store"
)

// memberMetrics is a member's Prometheus metrics (listed in
// docs/operators.md), one collector labelled with group and member,
// registered by Join with Config.Metrics and unregistered when the member
// stops, so that members that come and go leave no stale series. Nil
// without Config.Metrics: every hook is then a call on nil that returns.
//
// Gauges are read at scrape time and store errors are counted by a store
// wrapper (metricStore), so the member's code carries only one-line hooks
// where it has what they count. Claims, handoffs and losses are counted
// when the step's "rebalanced" line is logged, so counters and log agree.
type memberMetrics struct {
	reg prometheus.Registerer

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

// newMemberMetrics creates m's metrics (not registered).
func newMemberMetrics(m *Member) *memberMetrics {
	labels := prometheus.Labels{"group": m.cfg.Group, "member": m.cfg.Member}
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
	return &memberMetrics{
		owned: gauge("herd_partitions_owned", "Partitions the member owns and runs a handler for.", func() float64 {
			return float64(m.ownedCount())
		}),
		handlers: gauge("herd_handlers_running", "Handlers that have not returned, those being handed off included.", func() float64 {
			m.running.mu.Lock()
			defer m.running.mu.Unlock()
			return float64(len(m.running.handlers))
		}),
		live: gauge("herd_session_live", "1 while the member holds a live session that is not past its fence time, else 0.", func() float64 {
			if m.SessionLive() {
				return 1
			}
			return 0
		}),
		load: gauge("herd_member_load", "Sum of the measured loads of the partitions the member runs (Claim.ReportLoad's unit, or progress marks per second); 0 if it measures none.", func() float64 {
			if m.meter == nil {
				return 0
			}
			return m.meter.Total()
		}),
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

func (mm *memberMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{mm.owned, mm.handlers, mm.live, mm.load, mm.claims, mm.handoffs, mm.losses, mm.lostSS,
		mm.rebalance, mm.renewSeconds, mm.renewals, mm.fencing, mm.storeErrors}
}

// Describe and Collect make the member's metrics one prometheus.Collector,
// registered and unregistered in one call.
func (mm *memberMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range mm.collectors() {
		c.Describe(ch)
	}
}

func (mm *memberMetrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range mm.collectors() {
		c.Collect(ch)
	}
}

// registerMetrics registers the member's metrics with Config.Metrics, if
// set, and counts its store calls from then on. Called by Join.
func (m *Member) registerMetrics() error {
	if m.cfg.Metrics == nil {
		return nil
	}
	mm := newMemberMetrics(m)
	if err := m.cfg.Metrics.Register(mm); err != nil {
		if are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); ok {
			return fmt.Errorf("herd: join %q: metrics: a member %q of this group already has its metrics registered "+
				"with Config.Metrics (give each member of one process its own Config.Member, or its own registerer): %w: %w",
				m.cfg.Group, m.cfg.Member, store.ErrInvalid, are)
		}
		return fmt.Errorf("herd: join %q: metrics: %w: %w", m.cfg.Group, store.ErrInvalid, err)
	}
	mm.reg = m.cfg.Metrics
	m.metrics = mm
	m.st = metricStore{Store: m.st, mm: mm}
	return nil
}

// unregister removes the member's metrics from the registerer. Called when
// the member stops, before Done is closed.
func (mm *memberMetrics) unregister() {
	if mm != nil {
		mm.reg.Unregister(mm)
	}
}

// SessionLive reports whether the member holds a live session: open, not
// lost or fenced, and renewed recently enough that its fence time (the last
// successful renewal's send time plus SessionTTL-FenceMargin) has not come.
// It is false between sessions (after a loss, while the member opens a new
// one) and once the member has stopped. A health check can report it:
// while it is false the member runs no handler it could not be sure to own.
func (m *Member) SessionLive() bool {
	s := m.running.live.Load()
	return s != nil && s.ctx.Err() == nil && !s.pastFence()
}

// step counts a rebalance step that logStep has just logged.
func (mm *memberMetrics) step(s *stepLog) {
	if mm == nil {
		return
	}
	mm.claims.Add(float64(s.claimed.n))
	mm.handoffs.Add(float64(s.handoff.n))
	mm.losses.Add(float64(s.lost.n))
	mm.rebalance.Observe(time.Since(s.start).Seconds())
}

// sessionLost counts a lost session and the partitions it owned. Called by
// the reconcile loop before it forgets them.
func (mm *memberMetrics) sessionLost(m *Member) {
	if mm == nil {
		return
	}
	mm.lostSS.Inc()
	mm.losses.Add(float64(m.ownedCount()))
}

// leaving counts the partitions a Leave hands off. Called by the reconcile
// loop before it forgets them.
func (mm *memberMetrics) leaving(m *Member) {
	if mm == nil {
		return
	}
	mm.handoffs.Add(float64(m.ownedCount()))
}

// countFencing returns write, counting the writes it refuses for fencing:
// the store's ErrNotOwner, and ErrFenced (which claimWrite also wraps with
// ErrNotOwner when it sends nothing).
func (mm *memberMetrics) countFencing(write func(context.Context, []byte) error) func(context.Context, []byte) error {
	if mm == nil {
		return write
	}
	return func(ctx context.Context, v []byte) error {
		err := write(ctx, v)
		switch {
		case errors.Is(err, ErrFenced):
			mm.fencing.WithLabelValues("fenced").Inc()
		case errors.Is(err, store.ErrNotOwner):
			mm.fencing.WithLabelValues("not_owner").Inc()
		}
		return err
	}
}

// renewed counts a session renewal that took took and returned err, unless
// ctx (the session's) was cancelled: then the member dropped the session.
func (mm *memberMetrics) renewed(ctx context.Context, took time.Duration, err error) {
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
func (mm *memberMetrics) storeErr(ctx context.Context, op string, err error) error {
	if err == nil || errors.Is(err, store.ErrClaimed) || errors.Is(err, store.ErrNotOwner) ||
		errors.Is(err, store.ErrSessionExpired) || errors.Is(ctx.Err(), context.Canceled) {
		return err
	}
	mm.storeErrors.WithLabelValues(op).Inc()
	return err
}

// metricStore counts a member's store calls that fail. KeepAlive passes
// through uncounted: renewLoop counts it with its latency (renewed).
type metricStore struct {
	store.Store
	mm *memberMetrics
}

func (s metricStore) OpenSession(ctx context.Context, group, member string, weight int, ttl time.Duration) (string, error) {
	id, err := s.Store.OpenSession(ctx, group, member, weight, ttl)
	return id, s.mm.storeErr(ctx, opOpenSession, err)
}

func (s metricStore) CloseSession(ctx context.Context, group, session string) error {
	return s.mm.storeErr(ctx, opCloseSession, s.Store.CloseSession(ctx, group, session))
}

func (s metricStore) SetPartitions(ctx context.Context, group string, set store.PartitionSet) (store.SetResult, error) {
	res, err := s.Store.SetPartitions(ctx, group, set)
	return res, s.mm.storeErr(ctx, opSetPartitions, err)
}

func (s metricStore) Snapshot(ctx context.Context, group string) (*store.Snapshot, error) {
	snap, err := s.Store.Snapshot(ctx, group)
	return snap, s.mm.storeErr(ctx, opSnapshot, err)
}

func (s metricStore) GiveBack(ctx context.Context, group, partition, session string, epoch uint64) error {
	return s.mm.storeErr(ctx, opGiveBack, s.Store.GiveBack(ctx, group, partition, session, epoch))
}

func (s metricStore) Checkpoint(ctx context.Context, group, partition string, epoch uint64, value []byte) error {
	return s.mm.storeErr(ctx, opCheckpoint, s.Store.Checkpoint(ctx, group, partition, epoch, value))
}

func (s metricStore) Restore(ctx context.Context, group, partition string, epoch uint64, value []byte) error {
	return s.mm.storeErr(ctx, opRestore, s.Store.Restore(ctx, group, partition, epoch, value))
}

func (s metricStore) Changes(ctx context.Context, group string, after store.Version, max int) ([]store.Change, store.Version, error) {
	cs, v, err := s.Store.Changes(ctx, group, after, max)
	return cs, v, s.mm.storeErr(ctx, opChanges, err)
}

func (s metricStore) ExpireSessions(ctx context.Context, group string) (time.Duration, error) {
	next, err := s.Store.ExpireSessions(ctx, group)
	return next, s.mm.storeErr(ctx, opExpire, err)
}

func (s metricStore) ClaimBatch(ctx context.Context, group, session string, partitions []string) ([]store.ClaimResult, error) {
	rs, err := s.Store.ClaimBatch(ctx, group, session, partitions)
	return rs, s.mm.storeErr(ctx, opClaimBatch, err)
}

func (s metricStore) ReleaseBatch(ctx context.Context, group, session string, held []store.Ownership) ([]error, error) {
	errs, err := s.Store.ReleaseBatch(ctx, group, session, held)
	return errs, s.mm.storeErr(ctx, opReleaseBatch, err)
}

func (s metricStore) ReportLoads(ctx context.Context, group, session string, loads []store.Load) error {
	return s.mm.storeErr(ctx, opReportLoads, s.Store.ReportLoads(ctx, group, session, loads))
}
