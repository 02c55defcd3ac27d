package sim

import (
	"fmt"
	"io"
	"math"
	"text/tabwriter"
	"time"
)

// LoadSample is the state of a load-study run at one second after t0, on
// the true loads. r is a member's load over its capacity, mean the total
// load over the total capacity, LB the lower bound
// max(hottest partition / largest capacity, mean).
type LoadSample struct {
	At          time.Duration
	MaxOverMean float64 // max r / mean
	MaxOverLB   float64 // max r / LB
	// RestSpread is the largest |r / rest mean - 1| over the members that do
	// not hold a hot partition alone: repeatedly, a member whose largest
	// partition is hotter than the rest's mean x its capacity, and whose
	// other partitions carry at most 5 % of that partition's load (what the
	// lower bound's 5 % allows), is set apart, and the rest's mean
	// recomputed.
	RestSpread float64
	InBand     bool
	Moves      int // since t0
}

// LoadResult is one run of the load study.
type LoadResult struct {
	Scenario, Policy string
	Hot              string       // the partition made hotter, if any
	Before           LoadSample   // at t0, before the change
	Samples          []LoadSample // every second from t0 on
	// BandAt is the time from t0 until the fleet is in the band for good
	// (-1: not at the end), FirstBandAt until it first is.
	BandAt, FirstBandAt time.Duration
	// MovesToBand are the moves from t0 until BandAt, or in the first 10
	// minutes if the fleet is not in the band at the end.
	MovesToBand int
	Moves       int // all moves after t0
}

// sample records the state at now. In the band: max r within 10 % of the
// mean, or within 5 % of LB when a partition is hotter than the largest
// member's fair share; and RestSpread within 10 %.
func (r *LoadResult) sample(w *loadWorld, now time.Duration, moves int) {
	r.Samples = append(r.Samples, r.state(w, now, moves))
}

// state is the sample of w at now.
func (r *LoadResult) state(w *loadWorld, now time.Duration, moves int) LoadSample {
	var L, C, cmax, maxr float64
	for m := range w.caps {
		L += w.l[m]
		C += w.caps[m]
		cmax = max(cmax, w.caps[m])
		maxr = max(maxr, w.l[m]/w.caps[m])
	}
	mean, maxe := L/C, w.maxe
	lb := max(maxe/cmax, mean)
	ok := maxr <= 1.10*mean || maxe > mean*cmax && maxr <= 1.05*lb
	spread := restSpread(w, r.big(w))
	return LoadSample{
		At: now, MaxOverMean: maxr / mean, MaxOverLB: maxr / lb, RestSpread: spread,
		InBand: ok && spread <= 0.10, Moves: moves,
	}
}

// big returns each member's largest partition load.
func (r *LoadResult) big(w *loadWorld) []float64 {
	b := make([]float64, len(w.caps))
	for i, m := range w.owner {
		b[m] = max(b[m], w.load[i])
	}
	return b
}

// restSpread is LoadSample.RestSpread; big holds each member's largest
// partition load.
func restSpread(w *loadWorld, big []float64) float64 {
	apart := make([]bool, len(w.caps))
	var L, C float64
	for m := range w.caps {
		L += w.l[m]
		C += w.caps[m]
	}
	for {
		mu, changed := L/C, false
		for m := range w.caps {
			alone := w.l[m]-big[m] <= 0.05*big[m]
			if !apart[m] && alone && big[m] > mu*w.caps[m] && C > w.caps[m] {
				apart[m], changed = true, true
				L -= w.l[m]
				C -= w.caps[m]
			}
		}
		if !changed {
			break
		}
	}
	mu, spread := L/C, 0.0
	for m := range w.caps {
		if !apart[m] {
			spread = max(spread, math.Abs(w.l[m]/w.caps[m]/mu-1))
		}
	}
	return spread
}

// finish computes the summary from the samples.
func (r *LoadResult) finish() {
	r.BandAt, r.FirstBandAt = 0, -1
	for _, s := range r.Samples {
		if !s.InBand {
			r.BandAt = s.At + time.Second
		} else if r.FirstBandAt < 0 {
			r.FirstBandAt = s.At
		}
	}
	last := r.Samples[len(r.Samples)-1]
	r.Moves = last.Moves
	if !last.InBand {
		r.BandAt = -1
	}
	for _, s := range r.Samples {
		if r.BandAt >= 0 && s.At == r.BandAt || r.BandAt < 0 && s.At == 10*time.Minute {
			r.MovesToBand = s.Moves
		}
	}
	if r.BandAt < 0 && last.At < 10*time.Minute || r.BandAt > last.At {
		r.MovesToBand = last.Moves
	}
}

// at returns the sample at time t (the last one before it if t is past
// the end).
func (r *LoadResult) at(t time.Duration) LoadSample {
	s := r.Samples[0]
	for _, x := range r.Samples {
		if x.At > t {
			break
		}
		s = x
	}
	return s
}

// loadTimes are the times of the table's "over time" columns.
var loadTimes = []time.Duration{0, 30 * time.Second, time.Minute, 2 * time.Minute, 10 * time.Minute}

// WriteLoadTable prints one block per scenario and one row per policy:
// when it reached the band for good (and first), its moves until then and
// in all, and over time the most loaded member over the mean with the
// spread of the members that hold no hot partition alone (RestSpread).
func WriteLoadTable(w io.Writer, scs []LoadScenario, results []*LoadResult) error {
	for _, sc := range scs {
		fmt.Fprintf(w, "\n== %s: %s\n", sc.Name, sc.About)
		for _, r := range results {
			if r.Scenario == sc.Name && r.Hot != "" {
				fmt.Fprintf(w, "   made ten times hotter at t0: %s\n", r.Hot)
				break
			}
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprint(tw, "policy\tband\tfirst\tmoves-to-band\tmoves\tbefore max/mean rest\t")
		for _, t := range loadTimes {
			fmt.Fprintf(tw, "@%s max/mean rest\t", fmtDur(t))
		}
		fmt.Fprint(tw, "end max/LB\t\n")
		for _, r := range results {
			if r.Scenario != sc.Name {
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%.2f %5.1f%%\t", r.Policy, fmtDur(r.BandAt), fmtDur(r.FirstBandAt), r.MovesToBand, r.Moves,
				r.Before.MaxOverMean, 100*r.Before.RestSpread)
			for _, t := range loadTimes {
				s := r.at(t)
				fmt.Fprintf(tw, "%.2f %5.1f%%\t", s.MaxOverMean, 100*s.RestSpread)
			}
			fmt.Fprintf(tw, "%.3f\t\n", r.Samples[len(r.Samples)-1].MaxOverLB)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// LoadCheck is one of the load study's criteria on one scenario. Kind is
// "band", "moves" or "noise".
type LoadCheck struct {
	Scenario, Kind, What, Got string
	OK                        bool
}

// LoadCriteria checks the criteria of the load study on its results: in
// every scenario with a change, herd is in the band within two report
// intervals of t0 and makes no more moves until then than the KCL 3.x
// model makes until it is (or in 10 minutes if it never is); under noise,
// herd moves nothing.
func LoadCriteria(scs []LoadScenario, results []*LoadResult) []LoadCheck {
	find := func(sc, p string) *LoadResult {
		for _, r := range results {
			if r.Scenario == sc && r.Policy == p {
				return r
			}
		}
		return nil
	}
	var out []LoadCheck
	for _, sc := range scs {
		h, k := find(sc.Name, "herd"), find(sc.Name, "kcl-3.x")
		if h == nil {
			continue
		}
		if sc.Noise > 0 {
			out = append(out, LoadCheck{sc.Name, "noise", "herd moves nothing under noise in " + fmtDur(sc.Length), fmt.Sprintf("%d moves", h.Moves), h.Moves == 0})
			continue
		}
		ok := h.BandAt >= 0 && h.BandAt <= 2*ReportEvery
		out = append(out, LoadCheck{sc.Name, "band", "herd in the band within " + fmtDur(2*ReportEvery), fmtDur(h.BandAt), ok})
		if k != nil {
			out = append(out, LoadCheck{sc.Name, "moves", "herd's moves to the band <= kcl-3.x's", fmt.Sprintf("%d <= %d", h.MovesToBand, k.MovesToBand), h.MovesToBand <= k.MovesToBand})
		}
	}
	return out
}
