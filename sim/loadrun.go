package sim

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"time"
)

// LoadPolicies are the policies of the load study.
var LoadPolicies = []string{"herd", "kcl-3.x"}

// RunLoadStudy runs the load scenarios that match (nil: all; the large one
// only if large) with every load policy, for seeds first, first+1, ...,
// first+seeds-1. It prints the table of the first seed, then the criteria
// of every seed, and returns the results of all.
func RunLoadStudy(ctx context.Context, w io.Writer, match *regexp.Regexp, large bool, first uint64, seeds int, progress io.Writer) ([]*LoadResult, error) {
	var scs []LoadScenario
	for _, sc := range LoadScenarios() {
		if (match == nil || match.MatchString(sc.Name)) && (large || !sc.Large) {
			scs = append(scs, sc)
		}
	}
	var all []*LoadResult
	type tally struct{ ok, n int }
	met := map[string]*tally{}
	var order []string
	for s := range max(seeds, 1) {
		seed := first + uint64(s)
		var results []*LoadResult
		for _, sc := range scs {
			for _, p := range LoadPolicies {
				start := time.Now()
				r, err := RunLoad(ctx, sc, p, seed)
				if err != nil {
					return nil, err
				}
				if progress != nil {
					fmt.Fprintf(progress, "load study: seed %d %s %s in %s\n", seed, sc.Name, p, time.Since(start).Round(time.Millisecond))
				}
				results = append(results, r)
			}
		}
		all = append(all, results...)
		if s == 0 {
			fmt.Fprintf(w, "herdsim -load: seed %d; times are virtual, from t0 (see sim/load.go)\n", seed)
			if err := WriteLoadTable(w, scs, results); err != nil {
				return nil, err
			}
			fmt.Fprintln(w)
		}
		for _, c := range LoadCriteria(scs, results) {
			mark := "no "
			if c.OK {
				mark = "yes"
			}
			fmt.Fprintf(w, "seed %d  %-9s %s  %-44s %s\n", seed, c.Scenario, mark, c.What, c.Got)
			key := c.Scenario + ": " + c.What
			if met[key] == nil {
				met[key] = &tally{}
				order = append(order, key)
			}
			met[key].n++
			if c.OK {
				met[key].ok++
			}
		}
	}
	fmt.Fprintf(w, "\ncriteria met, over %d seeds:\n", max(seeds, 1))
	for _, k := range order {
		fmt.Fprintf(w, "  %2d/%-2d  %s\n", met[k].ok, met[k].n, k)
	}
	return all, nil
}
