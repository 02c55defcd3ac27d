// Package loadmeter measures the load of the partitions a member runs and
// decides which loads to publish (store.Store.ReportLoads).
//
// A partition's load is sampled once per report interval: by default the
// rate of its handler's progress marks over the interval (herd's Claim.Mark
// and Claim.Checkpoint: items processed per second), or the latest load
// the handler reported itself (Claim.ReportLoad: herd run's children report
// the CPU seconds per second of their process group). Samples are smoothed
// as in the simulation study (docs/simulation.md): a sample more than
// Jump times above or below the smoothed load is a real change and
// replaces it; any other moves it by Smooth of the difference. So a
// partition that turns ten times hotter shows at once, and +-20 % noise
// on every sample moves the load by about 1 % a sample.
//
// At each report interval the meter returns the loads that changed beyond
// a threshold since they were last published: by more than Rel of the
// published value and more than Abs (so noise at low load publishes
// nothing). A partition that starts on a member starts from the load last
// published for it, so a load survives its partition's move and the new
// owner publishes only once its own measure differs.
package loadmeter

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herdhq/herd/store"
)

// Thresholds of a change worth publishing, and the smoothing of samples
// (see the package doc).
const (
	Rel    = 0.10
	Abs    = 0.01
	Jump   = 1.5
	Smooth = 0.05
)

// Counter is what one running claim's handler feeds: its marks, or a load
// of its own. Its methods are safe for concurrent use and cost an atomic
// operation.
type Counter struct {
	marks atomic.Uint64
	own   atomic.Uint64 // math.Float64bits of the handler's load, when hasOwn
	has   atomic.Bool
}

// Mark counts one progress mark.
func (c *Counter) Mark() {
	if c != nil {
		c.marks.Add(1)
	}
}

// Report sets the handler's own load; a value that is not a finite number
// >= 0 is ignored.
func (c *Counter) Report(v float64) {
	if c == nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v > store.MaxLoad {
		return
	}
	c.own.Store(math.Float64bits(v))
	c.has.Store(true)
}

// part is one running partition.
type part struct {
	c         *Counter
	since     time.Time // start of the current window
	seen      uint64    // c.marks at since
	ewma      float64
	primed    bool // ewma holds a value
	published float64
	hasPub    bool
}

// Meter is one member's measure of its running partitions. Its methods are
// safe for concurrent use.
type Meter struct {
	mu    sync.Mutex
	tau   time.Duration
	parts map[string]*part
	kept  map[string]float64 // measures of partitions stopped with StopKeep
	// ownOnly: a partition's load is only what its handler reports
	// (Counter.Report); marks measure nothing (see NewOwnOnly).
	ownOnly bool
}

// New returns a meter smoothing over tau (the report interval).
func New(tau time.Duration) *Meter {
	return &Meter{tau: max(tau, time.Millisecond), parts: map[string]*part{}}
}

// NewOwnOnly returns a meter smoothing over tau that counts only the
// loads the handlers report: a partition whose handler never reports one
// is not measured, and publishes nothing (its marks say nothing of its
// load, as for a job's key, which checkpoints twice per run however long
// the run is).
func NewOwnOnly(tau time.Duration) *Meter {
	m := New(tau)
	m.ownOnly = true
	return m
}

// Start begins measuring partition p, run from now on with counter c;
// published (if ok) is the load last published for it, which the measure
// starts from.
func (m *Meter) Start(p string, c *Counter, now time.Time, published float64, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.kept, p)
	m.parts[p] = &part{c: c, since: now, seen: c.marks.Load(), ewma: published, primed: ok, published: published, hasPub: ok}
}

// Stop ends measuring partition p if c is its counter (a later Start of
// the same partition is left alone).
func (m *Meter) Stop(p string, c *Counter) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if pt := m.parts[p]; pt != nil && pt.c == c {
		delete(m.parts, p)
	}
}

// StopKeep is Stop, keeping p's measure for Measure until Start(p) or
// DropKept: the partition was lost with its member's session, and its
// load may have to be published again (the store may have lost it).
func (m *Meter) StopKeep(p string, c *Counter) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if pt := m.parts[p]; pt != nil && pt.c == c {
		delete(m.parts, p)
		if pt.primed {
			if m.kept == nil {
				m.kept = map[string]float64{}
			}
			m.kept[p] = round3(pt.ewma)
		}
	}
}

// Forget forgets the measure StopKeep kept of p.
func (m *Meter) Forget(p string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.kept, p)
}

// DropKept forgets the measures StopKeep kept.
func (m *Meter) DropKept() {
	m.mu.Lock()
	defer m.mu.Unlock()
	clear(m.kept)
}

// Sample folds the window since the last sample into each partition's
// measure, at now, and returns the loads to publish: those that changed
// beyond the thresholds since last published (never published: any), at
// most max of them, the largest changes first, sorted by partition. They
// count as published. A window shorter than half of tau is left to grow
// (a partition that just started keeps its starting value).
func (m *Meter) Sample(now time.Time, max int) []store.Load {
	m.mu.Lock()
	defer m.mu.Unlock()
	type change struct {
		p    string
		d    float64
		part *part
	}
	var out []change
	for p, pt := range m.parts {
		dt := now.Sub(pt.since)
		switch {
		case pt.c.has.Load():
			pt.fold(math.Float64frombits(pt.c.own.Load()))
		case m.ownOnly:
		case dt >= m.tau/2:
			n := pt.c.marks.Load()
			pt.fold(float64(n-pt.seen) / dt.Seconds())
			pt.since, pt.seen = now, n
		}
		if !pt.primed {
			continue
		}
		d := math.Abs(pt.ewma - pt.published)
		if !pt.hasPub || d > Abs && d > Rel*pt.published {
			out = append(out, change{p, d, pt})
		}
	}
	slices.SortFunc(out, func(a, b change) int {
		if a.d != b.d {
			if a.d > b.d {
				return -1
			}
			return 1
		}
		return strings.Compare(a.p, b.p)
	})
	if len(out) > max {
		out = out[:max]
	}
	loads := make([]store.Load, len(out))
	for i, c := range out {
		v := round3(c.part.ewma)
		c.part.published, c.part.hasPub = v, true
		loads[i] = store.Load{Partition: c.p, Load: v}
	}
	store.SortLoads(loads)
	return loads
}

// fold smooths sample v into the part's load (see the package doc).
func (pt *part) fold(v float64) {
	switch {
	case !pt.primed || v > Jump*pt.ewma || v*Jump < pt.ewma:
		pt.ewma, pt.primed = v, true
	default:
		pt.ewma += Smooth * (v - pt.ewma)
	}
}

// Published notes that p's load was published by someone as v (an entry
// of the log): the meter publishes again only once its measure differs
// from v beyond the thresholds.
func (m *Meter) Published(p string, v float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if pt := m.parts[p]; pt != nil {
		pt.published, pt.hasPub = v, true
	}
}

// Measure is partition p's current measure (or the one StopKeep kept),
// rounded as Sample publishes it; ok false if p is not measured or has no
// measure yet.
func (m *Meter) Measure(p string) (v float64, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if pt := m.parts[p]; pt != nil && pt.primed {
		return round3(pt.ewma), true
	}
	v, ok = m.kept[p]
	return v, ok
}

// Unpublish makes the loads given count as not published (their report
// failed): the next Sample returns them again if they still differ.
func (m *Meter) Unpublish(loads []store.Load) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, l := range loads {
		if pt := m.parts[l.Partition]; pt != nil {
			pt.hasPub = false
		}
	}
}

// Total is the sum of the current measures of the running partitions.
func (m *Meter) Total() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var t float64
	for _, pt := range m.parts {
		t += pt.ewma
	}
	return t
}

// round3 rounds v to three significant digits: a published load is a
// measure good to a few per cent, and its text in every entry of the log,
// which every member reads, is then at most 5 or 6 bytes ("0.977",
// "1.23e+06") instead of up to 24.
func round3(v float64) float64 {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return v
	}
	r, err := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 3, 64), 64)
	if err != nil {
		return v
	}
	return r
}
