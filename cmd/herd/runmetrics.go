package main

import (
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/herdhq/herd/internal/child"
)

// herd run's metrics about its children, beside the member's herd_*
// metrics, every series labelled group and member like them:
//
//	name                           type     labels  meaning
//	herd_run_children_running      gauge            children running now
//	herd_run_child_exits_total     counter  status  children that ended on their own (not those herd run stopped
//	                                                for a handoff, a leave or a lost session), by status: the exit
//	                                                code ("0" to "255"), "signal" (killed by a signal),
//	                                                "not_started" (the command could not be started) or "unknown"
//	                                                (its status could not be read)
//	herd_run_child_restarts_total  counter          children started again after one ended on its own
//	herd_run_givebacks_total       counter          partitions given back after --max-failures failures in a row
//
// The status label has a bounded set of values (at most 259, a handful in
// practice), so a child's exit codes cannot grow the series without bound.
//
// The member's id is known once it has joined: until then the collector
// shows nothing (no child runs before the member owns a partition).
type runMetrics struct {
	group     string
	member    atomic.Pointer[string]
	running   atomic.Int64
	restarts  atomic.Uint64
	giveBacks atomic.Uint64
	mu        sync.Mutex
	exits     map[string]uint64 // by status label
}

// Exit status labels other than exit codes.
const (
	exitLabelSignal     = "signal"
	exitLabelNotStarted = "not_started"
	exitLabelUnknown    = "unknown"
)

var (
	runChildrenRunningDesc = prometheus.NewDesc("herd_run_children_running",
		"Children of herd run running now.", []string{"group", "member"}, nil)
	runChildExitsDesc = prometheus.NewDesc("herd_run_child_exits_total",
		"Children that ended on their own, by status: the exit code, signal, or not_started.", []string{"group", "member", "status"}, nil)
	runChildRestartsDesc = prometheus.NewDesc("herd_run_child_restarts_total",
		"Children started again after one ended on its own.", []string{"group", "member"}, nil)
	runGiveBacksDesc = prometheus.NewDesc("herd_run_givebacks_total",
		"Partitions given back after --max-failures failures in a row.", []string{"group", "member"}, nil)
)

func newRunMetrics(group string) *runMetrics {
	return &runMetrics{group: group, exits: map[string]uint64{"0": 0}}
}

// joined sets the member id the series are labelled with.
func (rm *runMetrics) joined(member string) {
	if rm != nil {
		rm.member.Store(&member)
	}
}

func (rm *runMetrics) started() {
	if rm != nil {
		rm.running.Add(1)
	}
}

// ended counts a child that ended (p nil: it could not be started). onItsOwn:
// it was not stopped by herd run.
func (rm *runMetrics) ended(p *child.Process, onItsOwn bool) {
	if rm == nil {
		return
	}
	if p != nil {
		rm.running.Add(-1)
	}
	if !onItsOwn {
		return
	}
	label := exitLabelNotStarted
	if p != nil {
		label = exitLabel(p.Status())
	}
	rm.mu.Lock()
	rm.exits[label]++
	rm.mu.Unlock()
}

// exitLabel is the status label of a child that ended with code, or was
// killed by sig (see child.Process.Status).
func exitLabel(code int, sig syscall.Signal) string {
	switch {
	case sig != 0:
		return exitLabelSignal
	case code < 0 || code > 255:
		return exitLabelUnknown // its status could not be read
	}
	return strconv.Itoa(code)
}

func (rm *runMetrics) restarted() {
	if rm != nil {
		rm.restarts.Add(1)
	}
}

func (rm *runMetrics) gaveBack() {
	if rm != nil {
		rm.giveBacks.Add(1)
	}
}

// Describe and Collect make runMetrics a prometheus.Collector.
func (rm *runMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{runChildrenRunningDesc, runChildExitsDesc, runChildRestartsDesc, runGiveBacksDesc} {
		ch <- d
	}
}

func (rm *runMetrics) Collect(ch chan<- prometheus.Metric) {
	m := rm.member.Load()
	if m == nil {
		return
	}
	send := func(d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) {
		metric, err := prometheus.NewConstMetric(d, t, v, append([]string{rm.group, *m}, labels...)...)
		if err != nil {
			metric = prometheus.NewInvalidMetric(d, err)
		}
		ch <- metric
	}
	send(runChildrenRunningDesc, prometheus.GaugeValue, float64(rm.running.Load()))
	send(runChildRestartsDesc, prometheus.CounterValue, float64(rm.restarts.Load()))
	send(runGiveBacksDesc, prometheus.CounterValue, float64(rm.giveBacks.Load()))
	rm.mu.Lock()
	defer rm.mu.Unlock()
	for status, n := range rm.exits {
		send(runChildExitsDesc, prometheus.CounterValue, float64(n), status)
	}
}
