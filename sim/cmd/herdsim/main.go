// Command herdsim runs every simulation scenario with every policy - herd's
// real member code and the models of the systems it replaces - under
// virtual time, prints the comparison table, and writes report.json and one
// PNG chart per scenario.
//
//	go -C sim run ./cmd/herdsim                    # every scenario but the large one
//	go -C sim run ./cmd/herdsim -large             # and 1,000 members x 100,000 partitions
//	go -C sim run ./cmd/herdsim -run 'crash|leave' # a subset, by scenario name
//	go -C sim run ./cmd/herdsim -policies herd     # one policy
//	go -C sim run ./cmd/herdsim -load -large       # the load study (docs/simulation.md)
//
// Herd's member code reads package time, so it runs in virtual time inside
// testing/synctest bubbles, which need a *testing.T: the command runs its
// work as the one test of testing.Main (the entry point the testing package
// keeps for programs that run tests themselves). Nothing else about it is
// a test: the flags are the command's, the table goes to stdout, progress
// and errors to stderr, and the exit status is 0 on success.
//
// With -large the command also measures, apart from the scenarios, what one
// reconcile costs a herd member of the large group when it is alone in its
// process and reads a copy of the group, as from a remote store (see
// sim.ProbeReconcile): the per-member figures of a real deployment.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/herdhq/herd/sim"
)

func main() {
	var (
		out      = flag.String("out", "simout", "directory for report.json and the charts (empty: write nothing)")
		large    = flag.Bool("large", false, "include the large scenarios (1,000 members, 100,000 partitions) and the reconcile probe")
		match    = flag.String("run", "", "run only the scenarios whose name matches this regular expression")
		policies = flag.String("policies", "", "comma-separated policy names to run (default: all)")
		parallel = flag.Int("parallel", 0, "runs at a time (default GOMAXPROCS; large scenarios run alone)")
		seed     = flag.Uint64("seed", 1, "random seed")
		cold     = flag.Bool("cold", false, "models warm up by joining instead of starting from a balanced assignment")
		quiet    = flag.Bool("q", false, "no progress lines on stderr")
		list     = flag.Bool("list", false, "list the policies and scenarios and exit")
		load     = flag.Bool("load", false, "run the load study instead: herd's load-aware balance beside a KCL 3.x model (see docs/simulation.md)")
		seeds    = flag.Int("seeds", 1, "with -load: run this many seeds from -seed, and count the criteria met")
	)
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "herdsim: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	if *load {
		os.Exit(runLoad(*match, *large, *seed, *seeds, *quiet))
	}
	// Herd runs each of its runs in a bubble of the one test below.
	sim.Register(sim.Herd{Idle: synctest.Wait, Bubble: func(run func()) {
		synctest.Test(theT, func(*testing.T) { run() })
	}})
	all := sim.DefaultPolicies()
	if *list {
		for _, p := range all {
			fmt.Printf("policy   %-14s %s\n", p.Name(), p.Describe())
		}
		for _, sc := range sim.Scenarios() {
			fmt.Printf("scenario %-20s %s\n", sc.Name, sc.About)
		}
		return
	}
	o := sim.Options{Large: *large, Parallel: *parallel, Run: sim.RunOptions{Seed: *seed, ColdStart: *cold}}
	if err := selectRuns(&o, all, *match, *policies); err != nil {
		fmt.Fprintln(os.Stderr, "herdsim:", err)
		os.Exit(2)
	}
	if !*quiet {
		o.Progress = os.Stderr
	}
	probe := *large && o.Match == nil && (o.Policies == nil || hasHerd(o.Policies))

	testing.Main(func(string, string) (bool, error) { return true, nil },
		[]testing.InternalTest{{Name: "herdsim", F: func(t *testing.T) {
			theT = t
			if err := run(t.Context(), o, *out, probe); err != nil {
				fmt.Fprintln(os.Stderr, "herdsim:", err)
				t.Fail()
			}
			// testing.Main ends with a PASS or FAIL line on stdout; it is
			// not part of the command's output.
			os.Stdout = os.Stderr
		}}}, nil, nil)
}

// theT is the test the command runs in; herd's bubbles are made in it.
var theT *testing.T

func selectRuns(o *sim.Options, all []sim.Policy, match, policies string) error {
	if match != "" {
		re, err := regexp.Compile(match)
		if err != nil {
			return fmt.Errorf("-run: %w", err)
		}
		o.Match = re
	}
	if policies == "" {
		return nil
	}
	want := map[string]bool{}
	for _, n := range strings.Split(policies, ",") {
		want[strings.TrimSpace(n)] = true
	}
	for _, p := range all {
		if want[p.Name()] {
			o.Policies = append(o.Policies, p)
			delete(want, p.Name())
		}
	}
	if len(want) > 0 {
		return fmt.Errorf("-policies: unknown %v (have %s)", keys(want), names(all))
	}
	return nil
}

func run(ctx context.Context, o sim.Options, out string, probe bool) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt)
	defer stop()
	rep, err := sim.RunAll(ctx, o)
	if err != nil {
		return err
	}
	if probe {
		sc := sim.LargeScenario()
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "probing one herd member's reconcile at %d members x %d partitions\n", sc.Members, sc.Partitions)
		}
		var pc *sim.ReconcileCost
		synctest.Test(theT, func(*testing.T) {
			pc, err = sim.ProbeReconcile(ctx, sc.Members, sc.Partitions, synctest.Wait)
		})
		if err != nil {
			return fmt.Errorf("reconcile probe: %w", err)
		}
		rep.Probe = pc
	}
	fmt.Printf("herdsim: %d runs in %s (seed %d). Times are virtual; see sim/doc.go for the metrics.\n", len(rep.Results), rep.Wall.Round(time.Millisecond), rep.Seed)
	for _, p := range rep.Policies {
		fmt.Printf("  %-14s %s (failover bound %s)\n", p.Name, p.Describe, p.FailoverBound)
	}
	if err := rep.WriteTable(os.Stdout); err != nil {
		return err
	}
	if err := rep.WriteSummary(os.Stdout); err != nil {
		return err
	}
	if out == "" {
		return nil
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	jpath := filepath.Join(out, "report.json")
	f, err := os.Create(jpath)
	if err != nil {
		return err
	}
	err = rep.WriteJSON(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	paths, err := rep.WriteCharts(out)
	if err != nil {
		return err
	}
	fmt.Printf("\nwrote %s and %d charts in %s\n", jpath, len(paths), out)
	return nil
}

// runLoad runs the load study (no bubble: it is a model of loads and
// plans, without member processes) and returns the exit status.
func runLoad(match string, large bool, seed uint64, seeds int, quiet bool) int {
	var re *regexp.Regexp
	if match != "" {
		var err error
		if re, err = regexp.Compile(match); err != nil {
			fmt.Fprintln(os.Stderr, "herdsim: -run:", err)
			return 2
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var progress io.Writer
	if !quiet {
		progress = os.Stderr
	}
	if _, err := sim.RunLoadStudy(ctx, os.Stdout, re, large, seed, seeds, progress); err != nil {
		fmt.Fprintln(os.Stderr, "herdsim:", err)
		return 1
	}
	return 0
}

func hasHerd(ps []sim.Policy) bool {
	for _, p := range ps {
		if p.Name() == "herd" {
			return true
		}
	}
	return false
}

func keys(m map[string]bool) []string {
	var s []string
	for k := range m {
		s = append(s, k)
	}
	return s
}

func names(ps []sim.Policy) string {
	var s []string
	for _, p := range ps {
		s = append(s, p.Name())
	}
	return strings.Join(s, ", ")
}
