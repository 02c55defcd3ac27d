package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"herd"
)

// benchResult is one scenario's figures; --json prints one per line.
type benchResult struct {
	Scenario            string  `json:"scenario"`
	Store               string  `json:"store"`
	Partitions          int     `json:"partitions"`
	MembersBefore       int     `json:"members_before"`
	MembersAfter        int     `json:"members_after"`
	SecondsToBalance    float64 `json:"seconds_to_balance"`
	Moves               int     `json:"moves"`
	MinMoves            int     `json:"min_moves"`
	SessionTTLSeconds   float64 `json:"session_ttl_seconds"`
	MaxConcurrentOwners int     `json:"max_concurrent_owners"`
	// Steady-state figures (scenario "steady" only).
	StoreOpsPerMemberPerSecond *float64 `json:"store_ops_per_member_per_second,omitempty"`
	CPUSecondsPerMemberPerSec  *float64 `json:"cpu_seconds_per_member_per_second,omitempty"`
	HeapBytesPerMember         *uint64  `json:"heap_bytes_per_member,omitempty"`
}

type benchOpts struct {
	storeURL   string
	scenarios  []string
	jsonOut    bool
	ttl        time.Duration
	partitions int
}

// benchScenario sets up a fleet, applies one change, and measures it.
type benchScenario struct {
	name    string
	parts   int // default partitions
	before  int
	run     func(ctx context.Context, c *cluster, o benchOpts) (step, error)
	members func(before int) int
}

var benchScenarios = []benchScenario{
	{name: "scale-out", parts: 32, before: 1, members: func(int) int { return 4 },
		run: func(ctx context.Context, c *cluster, o benchOpts) (step, error) {
			return c.measure(ctx, 30*time.Second, func() error { _, err := c.join(3); return err })
		}},
	{name: "leave", parts: 32, before: 4, members: func(b int) int { return b - 1 },
		run: func(ctx context.Context, c *cluster, o benchOpts) (step, error) {
			last := c.live()[len(c.live())-1]
			return c.measure(ctx, 30*time.Second, func() error { return c.leave(ctx, last) })
		}},
	{name: "crash", parts: 32, before: 4, members: func(b int) int { return b - 1 },
		run: func(ctx context.Context, c *cluster, o benchOpts) (step, error) {
			last := c.live()[len(c.live())-1]
			return c.measure(ctx, o.ttl+30*time.Second, func() error { return c.crash(last) })
		}},
}

func benchCmd() *cobra.Command {
	o := benchOpts{}
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure time to balance and partitions moved after scale-out, leave and crash",
		Long: `bench runs each scenario on a fresh group in this process, in real time, with
default settings (session TTL 10s), and reports how long the fleet took to be
balanced again (every partition running exactly one handler, spread fair),
how many partitions moved against the minimum, and the most handlers seen
running at once for one partition.

Scenarios: ` + scenarioNames(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBench(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	cmd.Flags().StringVar(&o.storeURL, "store", "mem://", "store URL: mem:// (in-process) or redis://host:port")
	cmd.Flags().StringSliceVar(&o.scenarios, "scenario", nil, "scenarios to run (default all): "+scenarioNames())
	cmd.Flags().BoolVar(&o.jsonOut, "json", false, "print one JSON object per scenario")
	cmd.Flags().DurationVar(&o.ttl, "ttl", herd.DefaultSessionTTL, "session TTL")
	cmd.Flags().IntVar(&o.partitions, "partitions", 0, "partitions (default: each scenario's own)")
	return cmd
}

func scenarioNames() string {
	var n []string
	for _, s := range benchScenarios {
		n = append(n, s.name)
	}
	return strings.Join(n, ", ")
}

func runBench(ctx context.Context, out io.Writer, o benchOpts) error {
	conn, err := newConnector(o.storeURL)
	if err != nil {
		return err
	}
	if err := (herd.Config{Group: "bench", Handler: func(*herd.Claim) error { return nil }, SessionTTL: o.ttl}).Validate(); err != nil {
		return err
	}
	want := map[string]bool{}
	for _, s := range o.scenarios {
		want[s] = true
	}
	var results []benchResult
	for _, sc := range benchScenarios {
		if len(want) > 0 && !want[sc.name] {
			continue
		}
		delete(want, sc.name)
		r, err := runScenario(ctx, conn, sc, o)
		if err != nil {
			return fmt.Errorf("scenario %s: %w", sc.name, err)
		}
		results = append(results, r)
		if o.jsonOut {
			b, _ := json.Marshal(r)
			fmt.Fprintln(out, string(b))
		}
	}
	for s := range want {
		return fmt.Errorf("unknown scenario %q (known: %s)", s, scenarioNames())
	}
	if !o.jsonOut {
		printBenchTable(out, results)
	}
	return nil
}

func runScenario(ctx context.Context, conn *connector, sc benchScenario, o benchOpts) (benchResult, error) {
	parts := sc.parts
	if o.partitions > 0 {
		parts = o.partitions
	}
	group := fmt.Sprintf("bench-%s-%d", sc.name, time.Now().UnixNano())
	c := newCluster(ctx, group, parts, herd.Config{SessionTTL: o.ttl}, conn.connect)
	if err := c.setup(ctx); err != nil {
		return benchResult{}, err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c.stopAll(sctx)
	}()
	if _, err := c.measure(ctx, o.ttl+30*time.Second, func() error { _, err := c.join(sc.before); return err }); err != nil {
		return benchResult{}, fmt.Errorf("initial balance: %w", err)
	}
	s, err := sc.run(ctx, c, o)
	if err != nil {
		return benchResult{}, err
	}
	return benchResult{
		Scenario:            sc.name,
		Store:               conn.name(),
		Partitions:          parts,
		MembersBefore:       sc.before,
		MembersAfter:        sc.members(sc.before),
		SecondsToBalance:    s.Elapsed.Seconds(),
		Moves:               s.Moves,
		MinMoves:            s.MinMoves,
		SessionTTLSeconds:   o.ttl.Seconds(),
		MaxConcurrentOwners: s.MaxConcurrent,
	}, nil
}

func printBenchTable(out io.Writer, rs []benchResult) {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "scenario\tstore\tpartitions\tmembers\tbalanced after\tmoves\tmin moves\tmax owners at once\tsession TTL\t")
	for _, r := range rs {
		fmt.Fprintf(w, "%s\t%s\t%d\t%d→%d\t%.3fs\t%d\t%d\t%d\t%gs\t\n", r.Scenario, r.Store, r.Partitions,
			r.MembersBefore, r.MembersAfter, r.SecondsToBalance, r.Moves, r.MinMoves, r.MaxConcurrentOwners, r.SessionTTLSeconds)
	}
	w.Flush()
}
