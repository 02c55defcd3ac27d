package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteTable prints one block per scenario, one row per policy:
//
//	balance   time from the measured step until balanced for good
//	owned     time from the measured step until every partition is owned for good
//	moves     handler starts after the warm-up / the minimum / the ratio
//	reads/s, writes/s, rows/s   store operations per second after the warm-up
//	server    seconds of one store server's time per second after the warm-up
//	steady    (reads+writes)/s per member in the quiet window before the steps
//	double-s  partition-seconds with two live handlers
//	peak-imb  largest max-min of partitions per running member
//	violations  invariant breaches (see Invariants)
func (r *Report) WriteTable(w io.Writer) error {
	byScenario := map[string][]*Result{}
	for _, res := range r.Results {
		byScenario[res.Scenario] = append(byScenario[res.Scenario], res)
	}
	for _, sc := range r.Scenarios {
		rs := byScenario[sc.Name]
		if len(rs) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n== %s: %s\n", sc.Name, sc.About)
		steps := strings.Join(sc.Steps, "; ")
		if len(steps) > 160 {
			steps = steps[:157] + "..."
		}
		fmt.Fprintf(w, "   steps: %s\n", steps)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "policy\tbalance\towned\tunowned-s\tmoves\tmin\tratio\treads/s\twrites/s\trows/s\tserver\tsteady/member\tdouble-s\tpeak-imb\tviolations\t")
		for _, res := range rs {
			if res.Err != "" {
				fmt.Fprintf(tw, "%s\terror: %s\t\t\t\t\t\t\t\t\t\t\t\t\t\t\n", res.Policy, res.Err)
				continue
			}
			m := res.Metrics
			ratio := "-"
			if m.MinMoves > 0 {
				ratio = fmt.Sprintf("%.2f", m.MoveRatio())
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f\t%d\t%d\t%s\t%s\t%s\t%s\t%.3f\t%s\t%.1f\t%d\t%s\t\n",
				res.Policy, fmtDur(m.TimeToBalance), fmtDur(m.TimeToOwned), m.UnownedSeconds, m.Moves, m.MinMoves, ratio,
				fmtRate(m.Rates.Reads), fmtRate(m.Rates.Writes), fmtRate(m.Rates.Rows), m.Rates.Server, fmtRate(m.Steady.PerMember),
				m.DoubleSeconds, m.PeakImbalance, fmtViolations(res.Violations))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	var costly []*Result
	for _, res := range r.Results {
		if res.Cost.CPU > 0 {
			costly = append(costly, res)
		}
	}
	if len(costly) > 0 {
		fmt.Fprintf(w, "\n== cost of the measured runs (process CPU and heap; for models this is the simulator's cost)\n")
		fmt.Fprintf(w, "   rebalance: from the measured step until balanced again; per member: divided by the members at the end\n")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "scenario\tpolicy\twall\tcpu\tcpu/member/min\tcpu/rebalance\tcpu/member/rebalance\talloc/member/rebalance\treads/member/rebalance\theap/member\tpeak-heap/member\tevents\t")
		for _, res := range costly {
			c := res.Cost
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.1f\t%s\t%s\t%d\t\n", res.Scenario, res.Policy, c.Wall.Round(time.Millisecond),
				c.CPU.Round(time.Millisecond), c.CPUPerMemberMinute.Round(time.Microsecond), c.CPURebalance.Round(time.Millisecond),
				c.CPURebalancePerMember.Round(time.Microsecond), fmtBytes(c.AllocRebalancePerMember), c.ReadsRebalancePerMember,
				fmtBytes(c.HeapPerMember), fmtBytes(c.PeakHeapPerMember), c.Events)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if p := r.Probe; p != nil {
		fmt.Fprintf(w, "\n== herd: one read of the group (one reconcile) by one member of %d members x %d partitions,\n", p.Members, p.Partitions)
		fmt.Fprintf(w, "   alone in its process, reading a fresh copy of the group as from a remote store (sim.ProbeReconcile, %d reads)\n", p.Reads)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "cpu/read\tof which copy\talloc/read\tsnapshot\tworking memory\theld between reads\t")
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t\n", p.CPU.Round(time.Microsecond), p.Copy.Round(time.Microsecond),
			fmtBytes(p.Alloc), fmtBytes(p.SnapshotBytes), fmtBytes(p.Work), fmtBytes(p.Held))
		if err := tw.Flush(); err != nil {
			return err
		}
		for _, res := range costly {
			if res.Policy == "herd" && res.Members == p.Members && res.Partitions == p.Partitions && res.Cost.ReadsRebalancePerMember > 0 {
				k := res.Cost.ReadsRebalancePerMember
				fmt.Fprintf(w, "   per member per rebalance of %s: %.1f reads x %s = %s of CPU, %s allocated; peak %s (snapshot + working memory + held)\n",
					res.Scenario, k, p.CPU.Round(time.Microsecond), time.Duration(k*float64(p.CPU)).Round(time.Microsecond),
					fmtBytes(int64(k*float64(p.Alloc))), fmtBytes(p.SnapshotBytes+p.Work+p.Held))
			}
		}
	}
	return nil
}

func fmtRate(x float64) string {
	switch {
	case x == 0:
		return "0"
	case x < 10:
		return fmt.Sprintf("%.2f", x)
	case x < 1000:
		return fmt.Sprintf("%.0f", x)
	case x < 1e6:
		return fmt.Sprintf("%.1fk", x/1e3)
	}
	return fmt.Sprintf("%.1fM", x/1e6)
}

func fmtBytes(b int64) string {
	switch {
	case b < 1<<10:
		return fmt.Sprintf("%dB", b)
	case b < 1<<20:
		return fmt.Sprintf("%.1fKiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%.1fMiB", float64(b)/(1<<20))
}

func fmtViolations(v map[Invariant]int) string {
	var parts []string
	for _, inv := range Invariants {
		if n := v[inv]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s:%d", inv, n))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

// Series is a timeline downsampled for JSON and charts.
type Series struct {
	// Step between points; T0 is the end of the warm-up (both in seconds
	// of virtual time since the start of the run).
	StepSeconds float64   `json:"step_s"`
	T0Seconds   float64   `json:"t0_s"`
	Unowned     []int32   `json:"unowned"`
	Double      []int32   `json:"double"`
	MinHeld     []int32   `json:"min_held"`
	MaxHeld     []int32   `json:"max_held"`
	MeanHeld    []float32 `json:"mean_held"`
	Members     []string  `json:"members,omitempty"`
	Held        [][]int32 `json:"held,omitempty"`
}

// SeriesOf returns the run's timeline from `from` on, one point per step
// (rounded to whole samples; at least one sample).
func SeriesOf(res *Result, from, step time.Duration) *Series {
	tl := res.Timeline
	if tl == nil || tl.Len() == 0 {
		return nil
	}
	k := int(step / tl.Step)
	if k < 1 {
		k = 1
	}
	i0 := int(from/tl.Step) - 1
	if i0 < 0 {
		i0 = 0
	}
	s := &Series{StepSeconds: (time.Duration(k) * tl.Step).Seconds(), T0Seconds: res.WarmupEnd.Seconds(), Members: tl.Members}
	if tl.Members != nil {
		s.Held = make([][]int32, len(tl.Members))
	}
	for i := i0; i < tl.Len(); i += k {
		s.Unowned = append(s.Unowned, tl.Unowned[i])
		s.Double = append(s.Double, tl.Double[i])
		s.MinHeld = append(s.MinHeld, tl.MinHeld[i])
		s.MaxHeld = append(s.MaxHeld, tl.MaxHeld[i])
		s.MeanHeld = append(s.MeanHeld, tl.MeanHeld[i])
		for j := range tl.Members {
			s.Held[j] = append(s.Held[j], tl.Held[j][i])
		}
	}
	return s
}

// seriesStart is where charts and JSON series begin: a minute before the
// end of the warm-up (or at 0).
func seriesStart(res *Result) time.Duration {
	return max(0, res.WarmupEnd-time.Minute)
}

type resultJSON struct {
	*Result
	SeriesStart float64 `json:"series_start_s"`
	Series      *Series `json:"series,omitempty"`
}

// WriteJSON writes the report with every result's timeline downsampled to
// one point per second from a minute before the end of its warm-up.
func (r *Report) WriteJSON(w io.Writer) error {
	out := struct {
		*Report
		Results []resultJSON `json:"results"`
	}{Report: r}
	for _, res := range r.Results {
		from := seriesStart(res)
		out.Results = append(out.Results, resultJSON{Result: res, SeriesStart: from.Seconds(), Series: SeriesOf(res, from, time.Second)})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	return enc.Encode(out)
}

// ResultsFor returns the results of one scenario in policy order.
func (r *Report) ResultsFor(scenario string) []*Result {
	var rs []*Result
	for _, res := range r.Results {
		if res.Scenario == scenario {
			rs = append(rs, res)
		}
	}
	order := map[string]int{}
	for i, p := range r.Policies {
		order[p.Name] = i
	}
	sort.SliceStable(rs, func(i, j int) bool { return order[rs[i].Policy] < order[rs[j].Policy] })
	return rs
}
