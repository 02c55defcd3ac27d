// Command herdsim runs every simulation scenario with every policy (herd, when
// registered, and the models of the systems it replaces) under virtual time,
// prints the comparison table, and writes report.json and one PNG chart per
// scenario.
//
//	go run ./cmd/herdsim                    # every scenario but the large one
//	go run ./cmd/herdsim -large             # and 1,000 members x 100,000 partitions
//	go run ./cmd/herdsim -run 'crash|leave' # a subset, by scenario name
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"

	"herd/sim"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "herdsim:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		out      = flag.String("out", "simout", "directory for report.json and the charts (empty: write nothing)")
		large    = flag.Bool("large", false, "include the large scenarios (1,000 members, 100,000 partitions)")
		match    = flag.String("run", "", "run only the scenarios whose name matches this regular expression")
		policies = flag.String("policies", "", "comma-separated policy names to run (default: all)")
		parallel = flag.Int("parallel", 0, "runs at a time (default GOMAXPROCS; large scenarios run alone)")
		seed     = flag.Uint64("seed", 1, "random seed")
		cold     = flag.Bool("cold", false, "models warm up by joining instead of starting from a balanced assignment")
		quiet    = flag.Bool("q", false, "no progress lines on stderr")
		list     = flag.Bool("list", false, "list the policies and scenarios and exit")
	)
	flag.Parse()

	o := sim.Options{Large: *large, Parallel: *parallel, Run: sim.RunOptions{Seed: *seed, ColdStart: *cold}}
	if *match != "" {
		re, err := regexp.Compile(*match)
		if err != nil {
			return fmt.Errorf("-run: %w", err)
		}
		o.Match = re
	}
	all := sim.DefaultPolicies()
	if *policies != "" {
		want := map[string]bool{}
		for _, n := range strings.Split(*policies, ",") {
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
	}
	if *list {
		for _, p := range all {
			fmt.Printf("policy   %-14s %s\n", p.Name(), p.Describe())
		}
		for _, sc := range sim.Scenarios() {
			fmt.Printf("scenario %-20s %s\n", sc.Name, sc.About)
		}
		return nil
	}
	if !*quiet {
		o.Progress = os.Stderr
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := sim.RunAll(ctx, o)
	if err != nil {
		return err
	}
	fmt.Printf("herdsim: %d runs in %s (seed %d). Times are virtual; see sim/doc.go for the metrics.\n", len(rep.Results), rep.Wall.Round(1e6), rep.Seed)
	for _, p := range rep.Policies {
		fmt.Printf("  %-14s %s (failover bound %s)\n", p.Name, p.Describe, p.FailoverBound)
	}
	if err := rep.WriteTable(os.Stdout); err != nil {
		return err
	}
	if *out == "" {
		return nil
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	jpath := filepath.Join(*out, "report.json")
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
	paths, err := rep.WriteCharts(*out)
	if err != nil {
		return err
	}
	fmt.Printf("\nwrote %s and %d charts in %s\n", jpath, len(paths), *out)
	return nil
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
