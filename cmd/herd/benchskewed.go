package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/herdhq/herd"
)

// The skewed scenario: member processes whose handlers burn CPU in
// proportion to a skewed load per partition (Zipf of exponent skewExp over
// the partitions, the hottest below a fair share), skewCores cores for the
// whole fleet, less than the machine has, so that the CPU a process
// receives is the CPU it asks for. It runs twice on the same loads: once
// with no load published (the count balance), once with loads published
// every skewInterval (the balance by load), and measures each member
// process's CPU over skewWindow once settled. The handlers mark their
// progress once per millisecond of CPU burnt: the loads are measured, as
// for any library handler, not told.
const (
	skewCores    = 0.6
	skewExp      = 0.8
	skewInterval = 5 * time.Second
	skewWindow   = 20 * time.Second
)

// skewedFigures are the skewed scenario's figures for one balance.
type skewedFigures struct {
	Balance    string  `json:"balance"` // "count", "load" or "varying" (runSkewedOnce)
	CoresAsked float64 `json:"cores_asked"`
	// CoresReceived is the member processes' CPU over the window, in
	// cores: at least CoresAsked (their own work besides the handlers'
	// comes on top) unless the machine was too busy to give the handlers
	// what they asked for.
	CoresReceived  float64   `json:"cores_received"`
	CoresPerMember []float64 `json:"cores_per_member"` // over the window, sorted
	CPUMaxOverMean float64   `json:"cpu_max_over_mean"`
	WindowSeconds  float64   `json:"window_seconds"`
	// LoadReportsPerMemberPerInterval: ReportLoads calls per member per
	// report interval, from the members' start to the end of the window
	// (0 for the count balance).
	LoadReportsPerMemberPerInterval float64 `json:"load_reports_per_member_per_interval"`
	// What the loads cost, per member and second: over the window once
	// settled, and over the whole run (the first reports, every load new,
	// and the moves included).
	Window loadCost `json:"load_cost_window"`
	Run    loadCost `json:"load_cost_run"`
}

// loadCost is what the loads cost the store, per member and second:
// ReportLoads writes, log reads that brought load reports only (the
// reports woke them), load reports read and their bytes (benchloadcost.go),
// and every store operation for comparison.
type loadCost struct {
	Writes       float64 `json:"load_writes"`
	LoadReads    float64 `json:"load_only_reads"`
	LoadsRead    float64 `json:"loads_read"`
	BytesRead    float64 `json:"load_bytes_read"`
	ValuesRead   float64 `json:"load_values_read"` // loads in the reports read
	AllStoreOps  float64 `json:"all_store_ops"`
	AllLogReads  float64 `json:"all_log_reads"`
	Members      int     `json:"members"`
	SecondsCount float64 `json:"seconds"`
}

// costBetween is the loads' cost per member and second from counts a to
// b, over secs seconds and n members.
func costBetween(a, b memberCounts, n int, secs float64) loadCost {
	if n == 0 || secs <= 0 {
		return loadCost{}
	}
	per := func(x, y int64) float64 { return float64(y-x) / float64(n) / secs }
	return loadCost{Writes: per(a.LoadReports, b.LoadReports), LoadReads: per(a.LoadOnlyReads, b.LoadOnlyReads),
		LoadsRead: per(a.LoadsRead, b.LoadsRead), BytesRead: per(a.LoadBytesRead, b.LoadBytesRead), ValuesRead: per(a.LoadValues, b.LoadValues),
		AllStoreOps: per(a.ops(), b.ops()), AllLogReads: per(a.LogReads, b.LogReads), Members: n, SecondsCount: secs}
}

// zipfCores is the CPU (cores) each of parts partitions' handler asks
// for: cores in all, partition i's share in proportion to 1/(i+1)^exp.
func zipfCores(parts int, cores, exp float64) []float64 {
	w := make([]float64, parts)
	var sum float64
	for i := range w {
		w[i] = 1 / math.Pow(float64(i+1), exp)
		sum += w[i]
	}
	for i := range w {
		w[i] *= cores / sum
	}
	return w
}

// burn is a bench member's handler work for the skewed scenario: every 50
// ms it burns cores x 50 ms of CPU (of its thread's CPU clock, burnClock:
// the CPU it receives is the CPU it asks for; on a busy machine the
// period stretches instead), and marks once per millisecond burnt (the
// remainder carried to the next period). With vary > 0 it burns 1.6
// times as much in every other period of vary on the wall clock (the
// same periods in every process), so that every load changes beyond the
// threshold of a report every vary.
func burn(c *herd.Claim, cores float64, vary time.Duration) {
	const period = 50 * time.Millisecond
	clock, done := burnClock()
	defer done()
	var owed time.Duration
	for c.Context().Err() == nil {
		start := time.Now()
		d := time.Duration(cores * float64(period))
		if vary > 0 && start.UnixNano()/int64(vary)%2 == 1 {
			d = d * 8 / 5
		}
		spin(clock, d)
		for owed += d; owed >= time.Millisecond; owed -= time.Millisecond {
			_ = c.Mark(nil)
		}
		t := time.NewTimer(period - time.Since(start))
		select {
		case <-c.Context().Done():
		case <-t.C:
		}
		t.Stop()
	}
}

// spin runs until clock has advanced by d.
func spin(clock func() time.Duration, d time.Duration) {
	for c0 := clock(); clock()-c0 < d; {
	}
}

// wallClock is the wall clock as a burnClock.
func wallClock() (func() time.Duration, func()) {
	start := time.Now()
	return func() time.Duration { return time.Since(start) }, func() {}
}

// runSkewedScenario runs the skewed scenario with each balance.
func runSkewedScenario(ctx context.Context, conn *connector, sc benchScenario, o benchOpts) ([]benchResult, error) {
	if conn.mem != nil {
		return nil, errors.New("the skewed scenario measures member processes' CPU: give it a store they can share (--store redis://...)")
	}
	parts := sc.parts
	if o.partitions > 0 {
		parts = o.partitions
	}
	var rs []benchResult
	for _, mode := range []string{"count", "load", "varying"} {
		r, err := runSkewedOnce(ctx, conn, sc, parts, o, mode)
		if err != nil {
			return rs, err
		}
		rs = append(rs, r)
	}
	return rs, nil
}

// runSkewedOnce runs the skewed scenario with the count balance (mode
// "count": no load published), the balance by load ("load"), or the
// balance by load with every load 1.6 times higher every other two report
// intervals ("varying": what the reports cost when every load changes).
func runSkewedOnce(ctx context.Context, conn *connector, sc benchScenario, parts int, o benchOpts, mode string) (_ benchResult, err error) {
	byLoad, interval, vary := mode != "count", "0", time.Duration(0)
	if byLoad {
		interval = skewInterval.String()
	}
	if mode == "varying" {
		vary = 2 * skewInterval
	}
	group := fmt.Sprintf("bench-skewed-%s-%d", mode, time.Now().UnixNano())
	bf, err := newFleet(conn, group, parts, sc, o)
	if err != nil {
		return benchResult{}, err
	}
	f := bf.(*procFleet)
	f.args = func(int) []string {
		return []string{"--burn-cores", strconv.FormatFloat(skewCores, 'g', -1, 64), "--burn-skew", strconv.FormatFloat(skewExp, 'g', -1, 64),
			"--load-interval", interval, "--burn-vary", vary.String()}
	}
	defer func() { err = errors.Join(err, f.close()) }()
	progressf(o, "skewed/%s: %d members, %d partitions asking %.2f cores, on %s", mode, sc.before, parts, skewCores, conn.name())
	if err := f.setup(ctx); err != nil {
		return benchResult{}, err
	}
	began := time.Now()
	initial, err := f.measure(ctx, o.ttl+60*time.Second+fleetAllowance(parts, sc.before), func() error { _, err := f.join(sc.before); return err })
	if err != nil {
		return benchResult{}, fmt.Errorf("placement: %w", err)
	}
	settle := 2 * time.Second
	if byLoad {
		// Two intervals to publish the loads, one to plan and move, and
		// time for the moved partitions' handlers to burn steadily.
		settle = 5 * skewInterval
	}
	if err := sleepCtx(ctx, settle); err != nil {
		return benchResult{}, err
	}
	f.mu.Lock()
	live := f.liveLocked()
	f.mu.Unlock()
	cpu0, t0 := f.cpuOf(live), time.Now()
	f.mu.Lock()
	c0 := f.countsLocked()
	f.mu.Unlock()
	if err := sleepCtx(ctx, skewWindow+2*countsEvery); err != nil {
		return benchResult{}, err
	}
	secs := time.Since(t0).Seconds()
	f.mu.Lock()
	c1 := f.countsLocked()
	f.mu.Unlock()
	cpus, _ := f.usage(live, cpu0)
	fig := skewedFigures{Balance: mode, CoresAsked: skewCores, WindowSeconds: secs}
	if vary > 0 {
		fig.CoresAsked = skewCores * (1 + 1.6) / 2 // 1.6 times as much half of the time
	}
	var sum float64
	for _, c := range cpus {
		fig.CoresPerMember = append(fig.CoresPerMember, c/secs)
		sum += c
	}
	fig.CoresReceived = sum / secs
	if len(cpus) > 0 && sum > 0 {
		fig.CPUMaxOverMean = slices.Max(cpus) / (sum / float64(len(cpus)))
	}
	fig.Window = costBetween(c0, c1, len(live), secs)
	fig.Run = costBetween(memberCounts{}, c1, len(live), time.Since(began).Seconds())
	if byLoad && len(live) > 0 {
		fig.LoadReportsPerMemberPerInterval = float64(c1.LoadReports) / float64(len(live)) / (time.Since(began).Seconds() / skewInterval.Seconds())
	}
	progressf(o, "skewed/%s: busiest member process over the mean %.2f (cores %v), %.2f load reports per member per interval",
		mode, fig.CPUMaxOverMean, fig.CoresPerMember, fig.LoadReportsPerMemberPerInterval)
	progressf(o, "skewed/%s: loads' cost per member per second, window %+v, whole run %+v", mode, fig.Window, fig.Run)
	r := result("skewed/"+mode, conn, parts, 0, initial, o)
	r.Skewed = &fig
	return r, nil
}

func printSkewedLine(out io.Writer, r benchResult) {
	s := r.Skewed
	fmt.Fprintf(out, "\n%s (%d members, %d partitions asking %.2f cores, %.3f received): busiest member process's CPU over the mean %.2f, cores per member %.3f over %.0fs",
		r.Scenario, r.MembersAfter, r.Partitions, s.CoresAsked, s.CoresReceived, s.CPUMaxOverMean, s.CoresPerMember, s.WindowSeconds)
	if s.Balance != "count" {
		fmt.Fprintf(out, ", %.2f load reports per member per %v", s.LoadReportsPerMemberPerInterval, skewInterval)
	}
	fmt.Fprintln(out)
	if s.CoresReceived < 0.95*s.CoresAsked {
		fmt.Fprintf(out, "  the handlers received less CPU than they asked (the machine was busy, or the bench ran under nice): the ratio above is not the balance's\n")
	}
	for _, c := range []struct {
		name string
		c    loadCost
	}{{"once settled", s.Window}, {"whole run", s.Run}} {
		fmt.Fprintf(out, "  loads' cost per member per second, %s (%.0fs): %.3f load writes, %.3f log reads of load reports only, %.2f load reports read (%.1f loads, %.0f bytes); all store operations %.2f, log reads %.2f\n",
			c.name, c.c.SecondsCount, c.c.Writes, c.c.LoadReads, c.c.LoadsRead, c.c.ValuesRead, c.c.BytesRead, c.c.AllStoreOps, c.c.AllLogReads)
	}
}
