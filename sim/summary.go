package sim

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// summaryMetric is one matrix of WriteSummary: a cell per scenario and
// policy.
type summaryMetric struct {
	title string
	cell  func(*Result) string
}

var summaryMetrics = []summaryMetric{
	{"time until balanced for good after the measured step", func(r *Result) string { return fmtDur(r.Metrics.TimeToBalance) }},
	{"time until every partition is owned again for good", func(r *Result) string { return fmtDur(r.Metrics.TimeToOwned) }},
	{"partitions moved / the minimum", func(r *Result) string {
		return fmt.Sprintf("%d/%d", r.Metrics.Moves, r.Metrics.MinMoves)
	}},
	{"store reads + writes per second (after the warm-up)", func(r *Result) string {
		return fmtRate(r.Metrics.Rates.Reads) + "+" + fmtRate(r.Metrics.Rates.Writes)
	}},
	{"double ownership, partition-seconds", func(r *Result) string { return fmt.Sprintf("%.1f", r.Metrics.DoubleSeconds) }},
	{"invariant violations (all kinds)", func(r *Result) string {
		n := 0
		for _, inv := range Invariants { // not ResumeOverlap, a count
			n += r.Violations[inv]
		}
		return fmt.Sprint(n)
	}},
}

// WriteSummary prints the headline figures of the report as small
// matrices, one per metric, with a row per scenario and a column per
// policy: the table docs/simulation.md quotes. WriteTable has every metric.
func (r *Report) WriteSummary(w io.Writer) error {
	var policies []string
	seen := map[string]bool{}
	cells := map[[2]string]*Result{}
	for _, res := range r.Results {
		if !seen[res.Policy] {
			seen[res.Policy] = true
			policies = append(policies, res.Policy)
		}
		cells[[2]string{res.Scenario, res.Policy}] = res
	}
	fmt.Fprintf(w, "\n== summary (seed %d; times are virtual)\n", r.Seed)
	for _, m := range summaryMetrics {
		fmt.Fprintf(w, "\n-- %s\n", m.title)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprint(tw, "scenario\t")
		for _, p := range policies {
			fmt.Fprintf(tw, "%s\t", p)
		}
		fmt.Fprintln(tw)
		for _, sc := range r.Scenarios {
			row := false
			for _, p := range policies {
				if cells[[2]string{sc.Name, p}] != nil {
					row = true
				}
			}
			if !row {
				continue
			}
			fmt.Fprintf(tw, "%s\t", sc.Name)
			for _, p := range policies {
				res := cells[[2]string{sc.Name, p}]
				switch {
				case res == nil:
					fmt.Fprint(tw, "-\t")
				case res.Err != "":
					fmt.Fprint(tw, "error\t")
				default:
					fmt.Fprintf(tw, "%s\t", m.cell(res))
				}
			}
			fmt.Fprintln(tw)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}
