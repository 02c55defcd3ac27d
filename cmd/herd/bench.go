package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/herdhq/herd"
)

// benchResult is one scenario's figures; --json prints one per line.
type benchResult struct {
	Scenario         string  `json:"scenario"`
	Store            string  `json:"store"`
	Partitions       int     `json:"partitions"`
	MembersBefore    int     `json:"members_before"`
	MembersAfter     int     `json:"members_after"`
	SecondsToBalance float64 `json:"seconds_to_balance"`
	// SecondsToSettle: until the last member's copy of the group had read
	// the last entry of the change (the next change waits for it).
	SecondsToSettle     float64 `json:"seconds_to_settle"`
	Moves               int     `json:"moves"`
	MinMoves            int     `json:"min_moves"`
	SessionTTLSeconds   float64 `json:"session_ttl_seconds"`
	MaxConcurrentOwners int     `json:"max_concurrent_owners"`
	// What the rebalance cost the store, from the change until settled,
	// per member (after the change): operations (renewals, log reads and
	// writes included), reads of the whole group among them, and records
	// returned by reads (group reads and log entries). ServerCPUSeconds is
	// the store server's CPU time over the same span, when the store can
	// tell (Redis: INFO cpu), for the whole server.
	StoreOpsPerMember  float64  `json:"store_ops_per_member"`
	FullReadsPerMember float64  `json:"full_reads_per_member"`
	RowsReadPerMember  float64  `json:"rows_read_per_member"`
	ServerCPUSeconds   *float64 `json:"server_cpu_seconds,omitempty"`
	// Steady-state figures (scenario "steady" only).
	StoreOpsPerMemberPerSecond *float64 `json:"store_ops_per_member_per_second,omitempty"`
	CPUSecondsPerMemberPerSec  *float64 `json:"cpu_seconds_per_member_per_second,omitempty"`
	HeapBytesPerMember         *uint64  `json:"heap_bytes_per_member,omitempty"`
	// Scenario "jobs" only.
	Jobs *jobsFigures `json:"jobs,omitempty"`
}

type benchOpts struct {
	steadyFor  time.Duration
	storeURL   string
	scenarios  []string
	jsonOut    bool
	ttl        time.Duration
	partitions int           // 0: each scenario's own
	every      time.Duration // the jobs scenario's interval (0: its default)
	cpuProfile string        // write a CPU profile of the run to this file ("": none)
}

// validate checks every flag of bench. partitionsSet says whether
// --partition-count was given (then 0 is an error, not "the default").
func (o benchOpts) validate(partitionsSet bool) (*connector, error) {
	if partitionsSet || o.partitions != 0 {
		if err := checkPartitions(o.partitions); err != nil {
			return nil, err
		}
	}
	if err := checkTTL(o.ttl); err != nil {
		return nil, err
	}
	if err := checkDuration("steady-for", o.steadyFor, time.Second, 24*time.Hour); err != nil {
		return nil, err
	}
	if o.every != 0 {
		if err := checkDuration("every", o.every, time.Second, 24*time.Hour); err != nil {
			return nil, err
		}
	}
	for _, s := range o.scenarios {
		if !slices.ContainsFunc(benchScenarios, func(b benchScenario) bool { return b.name == s }) {
			return nil, fmt.Errorf("--scenario %q is not one of %s", s, scenarioNames())
		}
	}
	return newConnector(o.storeURL)
}

// benchScenario sets up a fleet, applies changes, and measures each.
type benchScenario struct {
	name   string
	parts  int // default partitions
	before int
	// run applies the scenario's changes to the balanced fleet and returns
	// one phase for each.
	run func(ctx context.Context, c *cluster, o benchOpts) ([]phase, error)
	// steady: no change; measure what a balanced fleet costs over a window.
	steady bool
	// placement: the first placement is a result of its own.
	placement bool
	// optIn: run only when named with --scenario (it takes minutes).
	optIn bool
	// jobs: the recurring jobs scenario (bench_jobs.go).
	jobs bool
}

// phase is one measured change of a scenario.
type phase struct {
	name   string // "" for a scenario's only change
	before int    // members before the change
	s      step
}

// change measures one change of the fleet as a phase.
func change(ctx context.Context, c *cluster, name string, timeout time.Duration, f func() error) ([]phase, error) {
	before := len(c.live())
	s, err := c.measure(ctx, timeout, f)
	if err != nil {
		return nil, err
	}
	return []phase{{name: name, before: before, s: s}}, nil
}

func joinPhase(name string, n int) func(ctx context.Context, c *cluster, o benchOpts) ([]phase, error) {
	return func(ctx context.Context, c *cluster, o benchOpts) ([]phase, error) {
		return change(ctx, c, name, 30*time.Second+balanceAllowance(len(c.parts)), func() error { _, err := c.join(n); return err })
	}
}

func crashPhase(name string, n int) func(ctx context.Context, c *cluster, o benchOpts) ([]phase, error) {
	return func(ctx context.Context, c *cluster, o benchOpts) ([]phase, error) {
		return change(ctx, c, name, o.ttl+30*time.Second+balanceAllowance(len(c.parts)), func() error {
			live := c.live()
			for _, id := range live[len(live)-n:] {
				if err := c.crash(id); err != nil {
					return err
				}
			}
			return nil
		})
	}
}

func phases(fs ...func(ctx context.Context, c *cluster, o benchOpts) ([]phase, error)) func(ctx context.Context, c *cluster, o benchOpts) ([]phase, error) {
	return func(ctx context.Context, c *cluster, o benchOpts) ([]phase, error) {
		var all []phase
		for _, f := range fs {
			p, err := f(ctx, c, o)
			if err != nil {
				return all, err
			}
			all = append(all, p...)
		}
		return all, nil
	}
}

var benchScenarios = []benchScenario{
	{name: "scale-out", parts: 32, before: 1, run: joinPhase("", 3)},
	{name: "leave", parts: 32, before: 4,
		run: func(ctx context.Context, c *cluster, o benchOpts) ([]phase, error) {
			last := c.live()[len(c.live())-1]
			return change(ctx, c, "", 30*time.Second+balanceAllowance(len(c.parts)), func() error { return c.leave(last) })
		}},
	{name: "crash", parts: 32, before: 4, run: crashPhase("", 1)},
	{name: "scale-out-large", parts: 1024, before: 10, run: joinPhase("", 10)},
	{name: "steady", parts: 10000, before: 16, steady: true},
	{name: "large", parts: 100000, before: 100, placement: true, optIn: true,
		run: phases(joinPhase("join", 10), crashPhase("crash", 10))},
	{name: "jobs", parts: jobsBenchKeys, before: jobsBenchMembers, optIn: true, jobs: true},
}

func benchCmd() *cobra.Command {
	o := benchOpts{}
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure time to balance and partitions moved after scale-out, leave and crash",
		Long: `bench runs each scenario on a fresh group in this process, in real time, with
default settings (session TTL 10s), and reports how long the fleet took to be
balanced again (every partition running exactly one handler, spread fair)
and settled (every member's copy of the group has read the change's last
entry; the next change waits for it), how many partitions moved against the
minimum, and the most handlers seen running at once for one partition. Each
scenario's group is deleted from the store when it ends, or on Ctrl-C.

Scenarios: ` + scenarioNames() + `

jobs: 10,000 keys on 10 members, each once per --every (default 1m, which
scales "every hour" down); it reports the lateness of runs (start minus due
time) and the store operations per run, over two intervals after one to
warm up.

--partition-count is at most ` + commas(maxPartitions) + `: every partition runs its own handler
goroutine in this one process (see docs/cli.md for the memory this costs).`,
		Example: `  herd bench
  herd bench --json --scenario scale-out,crash
  herd bench --store redis://127.0.0.1:6379/0?prefix=bench --ttl 2s
  herd bench --scenario steady --partition-count 10000 --steady-for 1m
  herd bench --store redis://127.0.0.1:6379/0 --scenario scale-out-large,large --json
  herd bench --store postgres://herd@db.internal/herd?schema=bench --scenario steady
  herd bench --scenario jobs --every 1m --store redis://127.0.0.1:6379`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			conn, err := o.validate(partitionCountChanged(cmd))
			if err != nil {
				return err
			}
			if o.cpuProfile != "" {
				stop, err := startCPUProfile(o.cpuProfile)
				if err != nil {
					return err
				}
				defer stop()
			}
			return runBenchOn(cmd.Context(), cmd.OutOrStdout(), conn, o)
		},
	}
	cmd.Flags().StringVar(&o.storeURL, "store", "mem://", "store URL: mem:// (in-process), sqlite://PATH, redis://host:port or postgres://host/db")
	cmd.Flags().StringSliceVar(&o.scenarios, "scenario", nil, "scenarios to run (default all): "+scenarioNames())
	cmd.Flags().BoolVar(&o.jsonOut, "json", false, "print one JSON object per scenario")
	cmd.Flags().DurationVar(&o.ttl, "ttl", herd.DefaultSessionTTL, "session TTL, "+minTTL.String()+" to "+maxTTL.String())
	addPartitionCount(cmd, &o.partitions, 0, "number of partitions, 1 to "+commas(maxPartitions)+" (default: each scenario's own)")
	cmd.Flags().DurationVar(&o.steadyFor, "steady-for", 30*time.Second, "how long the steady scenario measures a balanced fleet, 1s to 24h")
	cmd.Flags().DurationVar(&o.every, "every", 0, "the jobs scenario's interval, 1s to 24h (default 1m)")
	cmd.Flags().StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of this process to `FILE` (read it with go tool pprof)")
	return cmd
}

func scenarioNames() string {
	var n []string
	for _, s := range benchScenarios {
		if s.optIn {
			n = append(n, s.name+" (only when named: it takes minutes)")
		} else {
			n = append(n, s.name)
		}
	}
	return strings.Join(n, ", ")
}

// runBench validates o and runs the scenarios.
func runBench(ctx context.Context, out io.Writer, o benchOpts) error {
	conn, err := o.validate(false)
	if err != nil {
		return err
	}
	return runBenchOn(ctx, out, conn, o)
}

func runBenchOn(ctx context.Context, out io.Writer, conn *connector, o benchOpts) error {
	want := map[string]bool{}
	for _, s := range o.scenarios {
		want[s] = true
	}
	var results []benchResult
	for _, sc := range benchScenarios {
		if (len(want) > 0 && !want[sc.name]) || (len(want) == 0 && sc.optIn) {
			continue
		}
		var rs []benchResult
		var err error
		if sc.jobs {
			var r benchResult
			r, err = runJobsScenario(ctx, conn, o)
			rs = []benchResult{r}
		} else {
			rs, err = runScenario(ctx, conn, sc, o)
		}
		if err != nil {
			return fmt.Errorf("scenario %s: %w", sc.name, err)
		}
		results = append(results, rs...)
		if o.jsonOut {
			for _, r := range rs {
				b, _ := json.Marshal(r)
				fmt.Fprintln(out, string(b))
			}
		}
	}
	if !o.jsonOut {
		printBenchTable(out, results)
	}
	return nil
}

func runScenario(ctx context.Context, conn *connector, sc benchScenario, o benchOpts) (_ []benchResult, err error) {
	parts := sc.parts
	if o.partitions > 0 {
		parts = o.partitions
	}
	group := fmt.Sprintf("bench-%s-%d", sc.name, time.Now().UnixNano())
	c := newCluster(group, parts, herd.Config{SessionTTL: o.ttl}, conn.connect)
	defer func() { err = errors.Join(err, c.close()) }()
	if err := c.setup(ctx); err != nil {
		return nil, err
	}
	if closeCPU := c.watchServerCPU(ctx); closeCPU != nil {
		defer closeCPU()
	}
	initial, err := c.measure(ctx, o.ttl+60*time.Second+balanceAllowance(parts), func() error { _, err := c.join(sc.before); return err })
	if err != nil {
		return nil, fmt.Errorf("initial balance: %w", err)
	}
	if sc.steady {
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
		rs = append(rs, result(name, conn, parts, p.before, p.s, o))
	}
	return rs, nil
}

// result is the report of one measured step.
func result(name string, conn *connector, parts, before int, s step, o benchOpts) benchResult {
	r := benchResult{
		Scenario:            name,
		Store:               conn.name(),
		Partitions:          parts,
		MembersBefore:       before,
		MembersAfter:        s.Members,
		SecondsToBalance:    s.Elapsed.Seconds(),
		SecondsToSettle:     s.Settled.Seconds(),
		Moves:               s.Moves,
		MinMoves:            s.MinMoves,
		SessionTTLSeconds:   o.ttl.Seconds(),
		MaxConcurrentOwners: s.MaxConcurrent,
	}
	if n := float64(max(s.Members, 1)); n > 0 {
		r.StoreOpsPerMember = float64(s.Ops) / n
		r.FullReadsPerMember = float64(s.FullReads) / n
		r.RowsReadPerMember = float64(s.Rows) / n
	}
	if s.ServerCPU != nil {
		sec := s.ServerCPU.Seconds()
		r.ServerCPUSeconds = &sec
	}
	return r
}

func printBenchTable(out io.Writer, rs []benchResult) {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "scenario\tstore\tpartitions\tmembers\tbalanced after\tsettled after\tmoves\tmin moves\tmax owners at once\tops/member\trows read/member\tserver CPU\t")
	var steady, jobs []benchResult
	for _, r := range rs {
		if r.StoreOpsPerMemberPerSecond != nil {
			steady = append(steady, r)
		}
		if r.Jobs != nil {
			jobs = append(jobs, r)
		}
		cpu := "-"
		if r.ServerCPUSeconds != nil {
			cpu = fmt.Sprintf("%.3fs", *r.ServerCPUSeconds)
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%d→%d\t%.3fs\t%.3fs\t%d\t%d\t%d\t%.1f\t%.0f\t%s\t\n", r.Scenario, r.Store, r.Partitions,
			r.MembersBefore, r.MembersAfter, r.SecondsToBalance, r.SecondsToSettle, r.Moves, r.MinMoves, r.MaxConcurrentOwners,
			r.StoreOpsPerMember, r.RowsReadPerMember, cpu)
	}
	w.Flush()
	if len(rs) > 0 {
		fmt.Fprintf(out, "(session TTL %gs; settled: every member has read the change's last entry; ops and rows read are per member from the change until settled)\n", rs[0].SessionTTLSeconds)
	}
	for _, r := range steady {
		fmt.Fprintf(out, "\nsteady (%d members, %d partitions, balanced): %.3f store ops per member per second, "+
			"%.2f%% of a core and %.1f MiB of heap per member\n", r.MembersAfter, r.Partitions,
			*r.StoreOpsPerMemberPerSecond, *r.CPUSecondsPerMemberPerSec*100, float64(*r.HeapBytesPerMember)/(1<<20))
	}
	for _, r := range jobs {
		printJobsLine(out, r)
	}
}

// measureSteady lets a balanced fleet run for o.steadyFor (after one session
// TTL to settle) and reports its store operations, CPU and heap per member.
// The handlers do no work and write no checkpoints: the figures are the cost
// of coordination alone. CPU and heap are the whole process's, divided by
// the number of members (all members run in this process).
func measureSteady(ctx context.Context, c *cluster, conn *connector, sc benchScenario, parts int, initial step, o benchOpts) (benchResult, error) {
	select {
	case <-time.After(o.ttl):
	case <-ctx.Done():
		return benchResult{}, ctx.Err()
	}
	n := len(c.live())
	ops0, cpu0, t0 := c.storeOps(), processCPU(), time.Now()
	c.tr.Reset()
	select {
	case <-time.After(o.steadyFor):
	case <-ctx.Done():
		return benchResult{}, ctx.Err()
	}
	secs := time.Since(t0).Seconds()
	ops := float64(c.storeOps()-ops0) / float64(n) / secs
	cpu := (processCPU() - cpu0).Seconds() / float64(n) / secs
	if ok, why := c.tr.Balanced(c.parts, c.live()); !ok || c.tr.Moves() != 0 {
		return benchResult{}, fmt.Errorf("fleet did not stay balanced and still (%d moves): %s", c.tr.Moves(), why)
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heap := ms.HeapInuse / uint64(n)
	r := result(sc.name, conn, parts, 0, initial, o)
	r.MaxConcurrentOwners = max(initial.MaxConcurrent, c.tr.MaxConcurrent())
	r.StoreOpsPerMemberPerSecond = &ops
	r.CPUSecondsPerMemberPerSec = &cpu
	r.HeapBytesPerMember = &heap
	return r, nil
}

// processCPU is the user+system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
