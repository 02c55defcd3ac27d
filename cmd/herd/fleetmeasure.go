package main

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/internal/tracker"
	"github.com/herdhq/herd/store"
)

// steadyFigures are what a balanced fleet costs over a window, per member.
type steadyFigures struct {
	OpsPerSec      float64
	RenewalsPerSec *float64 // member processes only: renewals among OpsPerSec
	FullReads      int64    // reads of the whole group in the window, all members
	CPUPerSec      float64  // CPU seconds per member per second
	HeapPerMember  *uint64  // in-process members: this process's heap in use / members
	PeakRSS        *uint64  // member processes: the largest peak RSS, bytes
	MaxConcurrent  int
}

// counts sums the store counts every member reported (a member that is
// gone keeps its last ones). Called with f.mu held.
func (f *procFleet) countsLocked() memberCounts {
	var n memberCounts
	for _, m := range f.all {
		n.FullReads += m.counts.FullReads
		n.RecordReads += m.counts.RecordReads
		n.LogReads += m.counts.LogReads
		n.Writes += m.counts.Writes
		n.Renewals += m.counts.Renewals
		n.Rows += m.counts.Rows
		n.LoadReports += m.counts.LoadReports
		n.LoadOnlyReads += m.counts.LoadOnlyReads
		n.LoadsRead += m.counts.LoadsRead
		n.LoadBytesRead += m.counts.LoadBytesRead
		n.LoadValues += m.counts.LoadValues
		n.LastReadAt = max(n.LastReadAt, m.counts.LastReadAt)
	}
	return n
}

// cpuOf reads the CPU seconds of each live member process.
func (f *procFleet) cpuOf(live []int32) map[int32]float64 {
	out := map[int32]float64{}
	for _, i := range live {
		f.mu.Lock()
		m := f.all[i]
		f.mu.Unlock()
		if c, ok := procCPUSeconds(m.cmd.Process.Pid); ok {
			out[i] = c
		}
	}
	return out
}

// usage is the CPU seconds each of live used since cpu0 (0 for a member
// not in cpu0: it started during the step), and the largest peak RSS.
func (f *procFleet) usage(live []int32, cpu0 map[int32]float64) ([]float64, uint64) {
	var cpus []float64
	var rss uint64
	for i, c := range f.cpuOf(live) {
		cpus = append(cpus, c-cpu0[i])
		f.mu.Lock()
		pid := f.all[i].cmd.Process.Pid
		f.mu.Unlock()
		if r, ok := procPeakRSS(pid); ok {
			rss = max(rss, r)
		}
	}
	slices.Sort(cpus)
	return cpus, rss
}

func (f *procFleet) partIDs() []string {
	ids := make([]string, f.parts)
	for i, p := range herd.Numbered(f.parts) {
		ids[i] = p.ID
	}
	return ids
}

func (f *procFleet) name(i int32) string { return f.all[i].id }

// measure applies change to the fleet, waits until the members' reports say
// it is balanced, then until it is settled (no member read anything for
// settleQuiet), and returns the step's figures. Times are the members' own
// (they report when each handler started and stopped) from the moment
// before change.
func (f *procFleet) measure(ctx context.Context, timeout time.Duration, change func() error) (step, error) {
	f.mu.Lock()
	before := f.led.owners(f.name)
	f.led.reset()
	f.failures = 0
	c0 := f.countsLocked()
	live0 := f.liveLocked()
	f.mu.Unlock()
	cpu0 := f.cpuOf(live0)
	srv0, srvErr := f.serverCPUNow(ctx)
	start := time.Now()
	if err := change(); err != nil {
		return step{}, err
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	balancedAt, err := f.waitBalanced(wctx, start)
	if err != nil {
		return step{}, err
	}
	settledAt, err := f.settle(wctx, balancedAt)
	if err != nil {
		return step{}, err
	}
	f.mu.Lock()
	after := f.liveLocked()
	afterIDs := make([]string, len(after))
	for i, m := range after {
		afterIDs[i] = f.all[m].id
	}
	moves, maxConc := f.led.sweep()
	takeover, _ := f.led.takeover(func(m int32) bool { return f.all[m].killedAt >= start.UnixNano() }, start.UnixNano())
	c1 := f.countsLocked()
	failures := f.failures
	f.mu.Unlock()
	cpus, rss := f.usage(after, cpu0)
	s := step{Elapsed: balancedAt.Sub(start), Settled: settledAt.Sub(start), Moves: moves, MaxConcurrent: maxConc,
		Members: len(after), Ops: c1.ops() - c0.ops(), FullReads: c1.FullReads - c0.FullReads, RecordReads: c1.RecordReads - c0.RecordReads, Rows: c1.Rows - c0.Rows,
		MinMoves: tracker.MinMoves(f.partIDs(), before, afterIDs), JoinFailures: failures, Processes: true, PeakRSS: rss,
		Takeover: takeover}
	if len(cpus) > 0 {
		s.CPUMedian, s.CPUMax = cpus[len(cpus)/2], cpus[len(cpus)-1]
	}
	if srvErr == nil {
		if srv1, err := f.serverCPUNow(ctx); err == nil {
			d := srv1 - srv0
			s.ServerCPU = &d
		}
	}
	return s, nil
}

// waitBalanced waits until the reports say the live members run every
// partition once, spread fair, and returns when the last of the handler
// starts and stops that made it so happened (start, if none did).
func (f *procFleet) waitBalanced(ctx context.Context, start time.Time) (time.Time, error) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		f.mu.Lock()
		live := f.liveLocked()
		ok, latest, n := f.led.balanced(live), f.led.latest, len(f.led.events)
		f.mu.Unlock()
		if ok {
			if n == 0 || latest < start.UnixNano() {
				return start, nil
			}
			return time.Unix(0, latest), nil
		}
		select {
		case <-ctx.Done():
			f.mu.Lock()
			why := f.led.unbalanced(live, f.name)
			f.mu.Unlock()
			return time.Time{}, fmt.Errorf("not balanced (%d live members: %s): %w", len(live), why, ctx.Err())
		case <-f.poke:
		case <-tick.C:
		}
	}
}

// settle waits until no member reported reading anything for settleQuiet
// (plus twice the members' report interval, so that every read before is
// reported) since the fleet was seen balanced, and returns the time of the
// last read (at least balancedAt).
func (f *procFleet) settle(ctx context.Context, balancedAt time.Time) (time.Time, error) {
	seen := time.Now()
	tick := time.NewTicker(settleQuiet / 10)
	defer tick.Stop()
	for {
		f.mu.Lock()
		quiet, last := time.Since(f.rowsSeen), f.countsLocked().LastReadAt
		f.mu.Unlock()
		quiet = min(quiet, time.Since(seen))
		if quiet >= settleQuiet+2*countsEvery {
			if at := time.Unix(0, last); at.After(balancedAt) {
				return at, nil
			}
			return balancedAt, nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("balanced, but the members were still reading the group's log: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// steady lets the balanced fleet run for settle and until its first load
// reports are in (firstReports), then measures window: the cost of a fleet
// at rest.
func (f *procFleet) steady(ctx context.Context, settle, window time.Duration) (steadyFigures, error) {
	if err := sleepCtx(ctx, settle); err != nil {
		return steadyFigures{}, err
	}
	if err := f.firstReports(ctx); err != nil {
		return steadyFigures{}, err
	}
	f.mu.Lock()
	f.led.reset()
	c0, live := f.countsLocked(), f.liveLocked()
	f.mu.Unlock()
	cpu0, t0 := f.cpuOf(live), time.Now()
	if err := sleepCtx(ctx, window+2*countsEvery); err != nil {
		return steadyFigures{}, err
	}
	secs := time.Since(t0).Seconds()
	f.mu.Lock()
	c1, moved, balanced := f.countsLocked(), len(f.led.events), f.led.balanced(live)
	_, maxConc := f.led.sweep()
	f.mu.Unlock()
	if !balanced || moved != 0 {
		return steadyFigures{}, fmt.Errorf("fleet did not stay balanced and still (%d handler starts and stops)", moved)
	}
	cpus, rss := f.usage(live, cpu0)
	n := float64(len(live))
	var cpu float64
	for _, c := range cpus {
		cpu += c
	}
	renewals := float64(c1.Renewals-c0.Renewals) / n / secs
	return steadyFigures{OpsPerSec: float64(c1.ops()-c0.ops()) / n / secs, RenewalsPerSec: &renewals,
		FullReads: c1.FullReads - c0.FullReads, CPUPerSec: cpu / n / secs, PeakRSS: &rss, MaxConcurrent: maxConc}, nil
}

// reportsSettle is how long after the last member's first load report the
// steady window starts: the reports wake every member's log reader, which
// reads them over about one loadGather (1 s), and the members report their
// counts every countsEvery.
const reportsSettle = 2*time.Second + 2*countsEvery

// firstReports waits until every live member has published the loads of
// the partitions it took (its first LoadsReported: at the first multiple of
// the members' LoadReportInterval on the clock once they have run half an
// interval, internal/loadmeter), plus reportsSettle: those reports, a write
// and about two log reads per member once after a placement, are the
// placement's cost, not the fleet's at rest. After two intervals and
// reportsSettle it goes on regardless (a member with nothing to report
// writes nothing).
func (f *procFleet) firstReports(ctx context.Context) error {
	bound := time.Now().Add(2*herd.DefaultLoadReportInterval + reportsSettle)
	tick := time.NewTicker(countsEvery)
	defer tick.Stop()
	for time.Now().Before(bound) {
		f.mu.Lock()
		all := true
		for _, m := range f.all {
			all = all && (m.gone || m.counts.LoadReports > 0)
		}
		f.mu.Unlock()
		if all {
			return sleepCtx(ctx, reportsSettle)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}

// serverCPUNow reads the store server's CPU time (an error if the store
// cannot tell).
func (f *procFleet) serverCPUNow(ctx context.Context) (time.Duration, error) {
	if f.serverCPU == nil {
		return 0, fmt.Errorf("not measured")
	}
	return f.serverCPU(ctx)
}

func (f *procFleet) watchServerCPU(ctx context.Context) func() {
	read, closeFn := serverCPUReader(ctx, f.storeURL, f.connect)
	f.serverCPU = read
	return closeFn
}

// serverCPUReader returns the function that reads the store server's CPU
// time and the one that releases what it holds (both nil if not measured):
// Redis tells its own (a connection of its own, INFO cpu); a PostgreSQL
// server on this host is read from /proc; SQLite has no server (its work
// is the member processes' CPU).
func serverCPUReader(ctx context.Context, storeURL string, connect func(context.Context) (store.Store, error)) (func(context.Context) (time.Duration, error), func()) {
	scheme, _, _ := strings.Cut(strings.ToLower(storeURL), ":")
	if (scheme == "postgres" || scheme == "postgresql") && onThisHost(storeURL) {
		if _, err := localPostgresCPU(); err == nil {
			return func(context.Context) (time.Duration, error) { return localPostgresCPU() }, func() {}
		}
		return nil, nil
	}
	st, err := connect(ctx)
	if err != nil {
		return nil, nil
	}
	cpu, ok := st.(interface {
		ServerCPU(context.Context) (time.Duration, error)
	})
	if !ok {
		st.Close()
		return nil, nil
	}
	return cpu.ServerCPU, func() { st.Close() }
}

// onThisHost says whether a store URL's host is this machine (loopback, or
// none: a Unix socket).
func onThisHost(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	h := u.Hostname()
	if h == "" || h == "localhost" {
		return u.Query().Get("host") == "" || strings.HasPrefix(u.Query().Get("host"), "/")
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}
