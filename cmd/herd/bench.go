package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
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
	SecondsToSettle   float64 `json:"seconds_to_settle"`
	Moves             int     `json:"moves"`
	MinMoves          int     `json:"min_moves"`
	SessionTTLSeconds float64 `json:"session_ttl_seconds"`
	// SecondsToTakeover: a crash's, from the kill until every partition
	// of the killed members ran again elsewhere (member processes only).
	SecondsToTakeover *float64 `json:"seconds_to_takeover,omitempty"`
	// TiedSessions: the members tied their sessions (--tie-session).
	TiedSessions        bool `json:"tied_sessions,omitempty"`
	MaxConcurrentOwners int  `json:"max_concurrent_owners"`
	// What the rebalance cost the store, from the change until settled,
	// per member (after the change): operations (renewals, log reads and
	// writes included), reads of the whole group among them, and records
	// returned by reads (group reads and log entries). ServerCPUSeconds is
	// the store server's CPU time over the same span, when the store can
	// tell (Redis: INFO cpu; PostgreSQL on this host: /proc), for the
	// whole server.
	StoreOpsPerMember  float64 `json:"store_ops_per_member"`
	FullReadsPerMember float64 `json:"full_reads_per_member"`
	// RecordReadsPerMember: reads of some partitions' records (member
	// processes only; in this process they count as full reads).
	RecordReadsPerMember float64  `json:"record_reads_per_member,omitempty"`
	RowsReadPerMember    float64  `json:"rows_read_per_member"`
	ServerCPUSeconds     *float64 `json:"server_cpu_seconds,omitempty"`
	// Member processes (every store but mem://): members that failed to
	// join, and each member process's CPU seconds from the change until
	// settled (median and most) and the largest peak RSS of one.
	MemberProcesses       bool    `json:"member_processes"`
	JoinFailures          int     `json:"join_failures"`
	MemberCPUSecondsP50   float64 `json:"member_cpu_seconds_p50"`
	MemberCPUSecondsMax   float64 `json:"member_cpu_seconds_max"`
	MemberPeakRSSBytesMax uint64  `json:"member_peak_rss_bytes_max,omitempty"`
	// Steady-state figures (scenario "steady" only). Renewals are among
	// the operations (member processes only); full reads are those of all
	// members in the window (as FullReadsPerMember counts them).
	StoreOpsPerMemberPerSecond *float64 `json:"store_ops_per_member_per_second,omitempty"`
	RenewalsPerMemberPerSecond *float64 `json:"renewals_per_member_per_second,omitempty"`
	SteadyFullReads            *int64   `json:"steady_full_reads,omitempty"`
	CPUSecondsPerMemberPerSec  *float64 `json:"cpu_seconds_per_member_per_second,omitempty"`
	HeapBytesPerMember         *uint64  `json:"heap_bytes_per_member,omitempty"`
	// Scenario "jobs" only.
	Jobs *jobsFigures `json:"jobs,omitempty"`
	// Scenario "skewed" only.
	Skewed *skewedFigures `json:"skewed,omitempty"`
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
	memberProf string        // write each member process's CPU profile into this directory ("": none)
	memberLogs string        // write each member process's log into this directory ("": none)
	tie        memberFlags   // its tie alone: --tie-session of the member processes
	// memberExe is the herd binary the member processes run ("": this
	// process's own executable).
	memberExe string
	progress  io.Writer // progress lines while it runs (nil: none)
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
	if err := checkTie(o.tie.tie); err != nil {
		return nil, err
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
	name  string
	parts int // default partitions
	// sizes: the partition counts to run it with, one result each (nil:
	// parts alone).
	sizes  []int
	before int
	// joinWith: no set is stored before; each member joins with it.
	joinWith bool
	// run applies the scenario's changes to the balanced fleet and returns
	// one phase for each.
	run func(ctx context.Context, c benchFleet, o benchOpts) ([]phase, error)
	// steady: no change; measure what a balanced fleet costs over a window.
	steady bool
	// placement: the first placement is a result of its own.
	placement bool
	// optIn: run only when named with --scenario (it takes minutes).
	optIn bool
	// jobs: the recurring jobs scenario (bench_jobs.go).
	jobs bool
	// skewed: the balance by load against the count balance (benchskewed.go).
	skewed bool
}

// phase is one measured change of a scenario.
type phase struct {
	name   string // "" for a scenario's only change
	before int    // members before the change
	s      step
}

// change measures one change of the fleet as a phase.
func change(ctx context.Context, c benchFleet, name string, timeout time.Duration, f func() error) ([]phase, error) {
	before := len(c.live())
	s, err := c.measure(ctx, timeout, f)
	if err != nil {
		return nil, err
	}
	return []phase{{name: name, before: before, s: s}}, nil
}

func joinPhase(name string, n int) func(ctx context.Context, c benchFleet, o benchOpts) ([]phase, error) {
	return func(ctx context.Context, c benchFleet, o benchOpts) ([]phase, error) {
		return change(ctx, c, name, 30*time.Second+fleetAllowance(c.partitionCount(), len(c.live())+n), func() error { _, err := c.join(n); return err })
	}
}

func crashPhase(name string, n int) func(ctx context.Context, c benchFleet, o benchOpts) ([]phase, error) {
	return func(ctx context.Context, c benchFleet, o benchOpts) ([]phase, error) {
		return change(ctx, c, name, o.ttl+30*time.Second+fleetAllowance(c.partitionCount(), len(c.live())), func() error {
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

func phases(fs ...func(ctx context.Context, c benchFleet, o benchOpts) ([]phase, error)) func(ctx context.Context, c benchFleet, o benchOpts) ([]phase, error) {
	return func(ctx context.Context, c benchFleet, o benchOpts) ([]phase, error) {
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
		run: func(ctx context.Context, c benchFleet, o benchOpts) ([]phase, error) {
			last := c.live()[len(c.live())-1]
			return change(ctx, c, "", 30*time.Second+fleetAllowance(c.partitionCount(), len(c.live())), func() error { return c.leave(last) })
		}},
	{name: "crash", parts: 32, before: 4, run: crashPhase("", 1)},
	{name: "scale-out-large", parts: 1024, before: 10, run: joinPhase("", 10)},
	{name: "steady", parts: 10000, sizes: []int{10000, 100000}, before: 16, steady: true},
	{name: "large", parts: 100000, before: 100, placement: true, optIn: true,
		run: phases(joinPhase("join", 10), crashPhase("crash", 10))},
	{name: "large-start", parts: 100000, before: 100, placement: true, optIn: true, joinWith: true,
		run: phases()},
	{name: "jobs", parts: jobsBenchKeys, before: jobsBenchMembers, optIn: true, jobs: true},
	{name: "skewed", parts: 32, before: 4, optIn: true, skewed: true},
}

func benchCmd() *cobra.Command {
	o := benchOpts{}
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure time to balance and partitions moved after scale-out, leave and crash",
		Long: `bench runs each scenario on a fresh group, in real time, with default
settings (session TTL 10s). On mem:// the members run in this process; on
every other store each member is a process of its own (herd re-executed),
started, killed (SIGKILL: a crash) and stopped (SIGTERM: a graceful leave)
as a deployment would, and measured from outside. It reports how long the
fleet took to be balanced again (every partition running exactly one
handler, spread fair) and settled (every member's copy of the group has
read the change's last entry; the next change waits for it), how many
partitions moved against the minimum, the most handlers seen running at
once for one partition, the store operations and rows read per member, the
store server's CPU (Redis; PostgreSQL on this host), and each member
process's CPU seconds and peak RSS. Times count from the start of the first
member process (a placement) or from the change (the kill, the start of the
joining processes). Each scenario's group is deleted from the store when it
ends, or on Ctrl-C; every member process is stopped and reaped. Progress
goes to stderr when it is a terminal.

Scenarios: ` + scenarioNames() + `

steady: 16 members on 10,000 and on 100,000 partitions (a result each):
the placement, then --steady-for of the fleet at rest, from one session TTL
after the placement and, for member processes, once every member has
published the loads of the partitions it took (up to 2 minutes).
large: 100 members place 100,000 partitions, then 10 join, then 10 crash.
large-start: 100 members started at once, each joining with the 100,000
partitions as its set (none stored before): how many fail to join, and the
placement.

jobs: 10,000 keys on 10 members, each once per --every (default 1m, which
scales "every hour" down); it reports the lateness of runs (start minus due
time) and the store operations per run, over two intervals after one to
warm up.

--partition-count is at most ` + commas(maxPartitions) + `: on mem:// every partition runs its own
handler goroutine in this one process (see docs/cli.md for the memory this
costs).`,
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
			if isTerminal(cmd.ErrOrStderr()) {
				o.progress = cmd.ErrOrStderr()
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
	cmd.Flags().StringVar(&o.memberProf, "member-cpuprofile", "", "write each member process's CPU profile to `DIR`/MEMBER.pprof (go tool pprof merges them)")
	cmd.Flags().StringVar(&o.tie.tie, "tie-session", "auto",
		"tie each member process's session (as herd run --tie-session): auto or on (SQLite and PostgreSQL), or off; the crash scenarios report the takeover time")
	cmd.Flags().StringVar(&o.memberLogs, "member-logs", "", "write each member process's log (level info) to `DIR`/MEMBER.log")
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
		} else if sc.skewed {
			rs, err = runSkewedScenario(ctx, conn, sc, o)
		} else {
			rs, err = runScenario(ctx, conn, sc, o)
		}
		results = append(results, rs...)
		if o.jsonOut {
			for _, r := range rs {
				b, _ := json.Marshal(r)
				fmt.Fprintln(out, string(b))
			}
		}
		if err != nil { // what was measured before is printed too
			if !o.jsonOut {
				printBenchTable(out, results)
			}
			return fmt.Errorf("scenario %s: %w", sc.name, err)
		}
	}
	if !o.jsonOut {
		printBenchTable(out, results)
	}
	return nil
}
