package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/herdhq/herd"
)

// runScenario runs one scenario, once per size it has.
func runScenario(ctx context.Context, conn *connector, sc benchScenario, o benchOpts) ([]benchResult, error) {
	sizes := sc.sizes
	if o.partitions > 0 || len(sizes) == 0 {
		sizes = []int{sc.parts}
		if o.partitions > 0 {
			sizes = []int{o.partitions}
		}
	}
	var all []benchResult
	for _, parts := range sizes {
		rs, err := runScenarioWith(ctx, conn, sc, parts, o)
		all = append(all, rs...)
		if err != nil {
			return all, err
		}
	}
	return all, nil
}

// newFleet is the fleet a scenario runs on: members in this process on
// mem://, member processes on every other store.
func newFleet(conn *connector, group string, parts int, sc benchScenario, o benchOpts) (benchFleet, error) {
	if conn.mem != nil {
		return newCluster(group, parts, herd.Config{SessionTTL: o.ttl}, conn.connect), nil
	}
	exe := o.memberExe
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("finding herd's executable to run the members: %w", err)
		}
	}
	for flag, dir := range map[string]string{"--member-cpuprofile": o.memberProf, "--member-logs": o.memberLogs} {
		if dir == "" {
			continue
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("%s: %w", flag, err)
		}
	}
	f := newProcFleet(exe, conn.url, group, parts, o.ttl, sc.joinWith, conn.connect, o.progress)
	f.profileDir, f.logDir = o.memberProf, o.memberLogs
	f.tie = o.tie.tie
	return f, nil
}

func runScenarioWith(ctx context.Context, conn *connector, sc benchScenario, parts int, o benchOpts) (_ []benchResult, err error) {
	group := fmt.Sprintf("bench-%s-%d", sc.name, time.Now().UnixNano())
	c, err := newFleet(conn, group, parts, sc, o)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, c.close()) }()
	progressf(o, "%s: %d members, %d partitions, on %s", sc.name, sc.before, parts, conn.name())
	if err := c.setup(ctx); err != nil {
		return nil, err
	}
	if closeCPU := c.watchServerCPU(ctx); closeCPU != nil {
		defer closeCPU()
	}
	initial, err := c.measure(ctx, o.ttl+60*time.Second+fleetAllowance(parts, sc.before), func() error { _, err := c.join(sc.before); return err })
	if err != nil {
		return nil, fmt.Errorf("initial balance: %w", err)
	}
	progressf(o, "%s: placed in %.3fs (settled %.3fs)", sc.name, initial.Elapsed.Seconds(), initial.Settled.Seconds())
	if sc.steady {
		progressf(o, "%s: measuring the balanced fleet for %v after %v", sc.name, o.steadyFor, o.ttl)
		r, err := measureSteady(ctx, c, conn, sc, parts, initial, o)
		return []benchResult{r}, err
	}
	var rs []benchResult
	if sc.placement {
		rs = append(rs, result(sc.name+"/placement", conn, parts, 0, initial, o))
	}
	ps, err := sc.run(ctx, c, o)
	if err != nil {
		return nil, err
	}
	for _, p := range ps {
		name := sc.name
		if p.name != "" {
			name += "/" + p.name
		}
		progressf(o, "%s: balanced in %.3fs (settled %.3fs), %d moves (minimum %d)", name, p.s.Elapsed.Seconds(), p.s.Settled.Seconds(), p.s.Moves, p.s.MinMoves)
		if p.s.Takeover > 0 {
			progressf(o, "%s: taken over in %.3fs", name, p.s.Takeover.Seconds())
		}
		rs = append(rs, result(name, conn, parts, p.before, p.s, o))
	}
	return rs, nil
}

func progressf(o benchOpts, format string, args ...any) {
	if o.progress != nil {
		fmt.Fprintf(o.progress, "bench: "+format+"\n", args...)
	}
}

// result is the report of one measured step.
func result(name string, conn *connector, parts, before int, s step, o benchOpts) benchResult {
	r := benchResult{
		Scenario:              name,
		Store:                 conn.name(),
		Partitions:            parts,
		MembersBefore:         before,
		MembersAfter:          s.Members,
		SecondsToBalance:      s.Elapsed.Seconds(),
		SecondsToSettle:       s.Settled.Seconds(),
		Moves:                 s.Moves,
		MinMoves:              s.MinMoves,
		SessionTTLSeconds:     o.ttl.Seconds(),
		MaxConcurrentOwners:   s.MaxConcurrent,
		MemberProcesses:       s.Processes,
		JoinFailures:          s.JoinFailures,
		MemberCPUSecondsP50:   s.CPUMedian,
		MemberCPUSecondsMax:   s.CPUMax,
		MemberPeakRSSBytesMax: s.PeakRSS,
	}
	if n := float64(max(s.Members, 1)); n > 0 {
		r.StoreOpsPerMember = float64(s.Ops) / n
		r.FullReadsPerMember = float64(s.FullReads) / n
		r.RecordReadsPerMember = float64(s.RecordReads) / n
		r.RowsReadPerMember = float64(s.Rows) / n
	}
	if s.Takeover > 0 {
		sec := s.Takeover.Seconds()
		r.SecondsToTakeover = &sec
	}
	r.TiedSessions = s.Processes && o.tie.tieSession(conn.scheme)
	if s.ServerCPU != nil {
		sec := s.ServerCPU.Seconds()
		r.ServerCPUSeconds = &sec
	}
	return r
}

// measureSteady lets a balanced fleet run for o.steadyFor (after one session
// TTL to settle, and for member processes after their first load reports)
// and reports its store operations, CPU and memory per
// member. The handlers do no work and write no checkpoints: the figures are
// the cost of coordination alone.
func measureSteady(ctx context.Context, c benchFleet, conn *connector, sc benchScenario, parts int, initial step, o benchOpts) (benchResult, error) {
	f, err := c.steady(ctx, o.ttl, o.steadyFor)
	if err != nil {
		return benchResult{}, err
	}
	r := result(sc.name, conn, parts, 0, initial, o)
	r.MaxConcurrentOwners = max(initial.MaxConcurrent, f.MaxConcurrent)
	r.StoreOpsPerMemberPerSecond = &f.OpsPerSec
	r.RenewalsPerMemberPerSecond = f.RenewalsPerSec
	r.SteadyFullReads = &f.FullReads
	r.CPUSecondsPerMemberPerSec = &f.CPUPerSec
	r.HeapBytesPerMember = f.HeapPerMember
	if f.PeakRSS != nil {
		r.MemberPeakRSSBytesMax = *f.PeakRSS
	}
	return r, nil
}
