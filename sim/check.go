package sim

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Invariant names one property the checker verifies.
type Invariant string

const (
	// Exclusive: never two live handlers for one partition (under default
	// settings, i.e. no forced takeover).
	Exclusive Invariant = "exclusive"
	// Failover: every partition is owned again within the policy's
	// failover bound after the scenario's last fault.
	Failover Invariant = "failover"
	// FairSpread: at the end, every member holds floor(P/N) or ceil(P/N)
	// partitions and every partition has exactly one handler.
	FairSpread Invariant = "fair-spread"
	// Monotonic: accepted checkpoints of a partition never go backwards.
	Monotonic Invariant = "checkpoint-monotonic"
	// Fenced: no checkpoint is accepted under an epoch older than the
	// newest one granted for the partition.
	Fenced Invariant = "fenced-write"
	// ResumeOverlap is not a breach but a count: overlaps of less than
	// ResumeGrace right after a paused member resumed (see ResumeGrace).
	ResumeOverlap Invariant = "resume-overlap"
)

// Invariants lists every invariant, in report order.
var Invariants = []Invariant{Exclusive, Failover, FairSpread, Monotonic, Fenced}

// Violation is one breach of an invariant.
type Violation struct {
	Invariant Invariant     `json:"invariant"`
	At        time.Duration `json:"at_ns"`
	Partition string        `json:"partition,omitempty"`
	Members   []string      `json:"members,omitempty"`
	Detail    string        `json:"detail"`
}

func (v Violation) String() string {
	s := fmt.Sprintf("%s at %s", v.Invariant, fmtDur(v.At))
	if v.Partition != "" {
		s += " partition " + v.Partition
	}
	if len(v.Members) > 0 {
		s += " members " + strings.Join(v.Members, ",")
	}
	return s + ": " + v.Detail
}

// Checker verifies the invariants. The recorder feeds it every handler
// transition and checkpoint as they happen; the runner feeds it the
// timeline and the final state. It keeps a count of every breach and the
// details of the first MaxDetails of each kind.
type Checker struct {
	// Bound is the failover bound (Policy.FailoverBound).
	Bound time.Duration
	// MaxDetails caps the violations kept per invariant (default 20).
	MaxDetails int

	counts   map[Invariant]int
	details  []Violation
	perKind  map[Invariant]int
	rejected int64 // checkpoint writes the store refused (fencing at work)

	// Breaches found before from are counted apart (warm-up).
	from   time.Duration
	before map[Invariant]int
	// recoverFrom is the time of the scenario's last fault: a partition
	// unowned since before it must be owned within Bound after it.
	recoverFrom time.Duration

	// double-ownership episodes in progress: partition -> start
	open map[*partState]Violation
}

// NewChecker returns a checker with the given failover bound.
func NewChecker(bound time.Duration) *Checker {
	return &Checker{Bound: bound, MaxDetails: 20, counts: map[Invariant]int{}, perKind: map[Invariant]int{},
		before: map[Invariant]int{}, open: map[*partState]Violation{}}
}

// measureFrom makes breaches found before t count apart (Before): the
// warm-up is a cold start of the whole fleet, not the scenario measured.
func (c *Checker) measureFrom(t time.Duration) { c.from = t }

func (c *Checker) report(v Violation) {
	if v.At < c.from {
		c.before[v.Invariant]++
		return
	}
	c.counts[v.Invariant]++
	if c.perKind[v.Invariant] < c.MaxDetails {
		c.perKind[v.Invariant]++
		c.details = append(c.details, v)
	}
}

func (c *Checker) doubleStarted(now time.Duration, p *partState, members []string, afterResume bool) {
	inv := Exclusive
	if afterResume {
		inv = ResumeOverlap
	}
	c.open[p] = Violation{Invariant: inv, At: now, Partition: p.id, Members: members}
}

func (c *Checker) doubleEnded(now time.Duration, p *partState) {
	v, ok := c.open[p]
	if !ok {
		return
	}
	delete(c.open, p)
	if v.Invariant == ResumeOverlap && now-v.At >= ResumeGrace {
		v.Invariant = Exclusive // too long to be the resumed member noticing
	}
	v.Detail = fmt.Sprintf("%d live handlers for %s", len(v.Members), fmtDur(now-v.At))
	c.report(v)
}

func (c *Checker) checkpoint(now time.Duration, p *partState, member string, epoch, value uint64) {
	if p.hasCkpt && value < p.ckpt {
		c.report(Violation{Invariant: Monotonic, At: now, Partition: p.id, Members: []string{member},
			Detail: fmt.Sprintf("checkpoint went back from %d to %d", p.ckpt, value)})
	}
	if epoch < p.grant {
		c.report(Violation{Invariant: Fenced, At: now, Partition: p.id, Members: []string{member},
			Detail: fmt.Sprintf("write accepted with epoch %d after epoch %d was granted", epoch, p.grant)})
	}
}

// closeOpen reports the double-ownership episodes still running at the end.
func (c *Checker) closeOpen(now time.Duration) {
	ps := make([]*partState, 0, len(c.open))
	for p := range c.open {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].id < ps[j].id })
	for _, p := range ps {
		c.doubleEnded(now, p)
	}
}

// recoverAfter sets the time of the last fault (see gapEnded).
func (c *Checker) recoverAfter(t time.Duration) { c.recoverFrom = t }

// gapEnded checks one unowned period of a partition against the failover
// bound: a partition must be owned again within Bound of the start of the
// period, or of the last fault if the period began before it (nothing can
// be owned safely during, say, a store outage).
func (c *Checker) gapEnded(p *partState, from, to time.Duration) {
	if to > max(from, c.recoverFrom)+c.Bound {
		c.report(Violation{Invariant: Failover, At: from, Partition: p.id,
			Detail: fmt.Sprintf("unowned for %s (bound %s)", fmtDur(to-from), fmtDur(c.Bound))})
	}
}

// gapOpen checks a period still running at the end of the run.
func (c *Checker) gapOpen(p *partState, from, now time.Duration) {
	if now > max(from, c.recoverFrom)+c.Bound {
		c.report(Violation{Invariant: Failover, At: from, Partition: p.id,
			Detail: fmt.Sprintf("unowned for %s and still at the end (bound %s)", fmtDur(now-from), fmtDur(c.Bound))})
	}
}

// checkSpread verifies the final assignment.
func (c *Checker) checkSpread(v view) {
	n := len(v.members)
	if n == 0 {
		return
	}
	lo, hi := v.inSet/n, (v.inSet+n-1)/n
	var bad []string
	for _, m := range v.members {
		if m.held < lo || m.held > hi {
			bad = append(bad, fmt.Sprintf("%s=%d", m.id, m.held))
		}
	}
	if len(bad) > 0 || v.unowned > 0 || v.double > 0 {
		if len(bad) > 8 {
			bad = append(bad[:8], "...")
		}
		c.report(Violation{Invariant: FairSpread, At: v.t, Detail: fmt.Sprintf("want %d..%d per member; %d unowned, %d double; off: %s", lo, hi, v.unowned, v.double, strings.Join(bad, " "))})
	}
}

// Counts returns the number of violations of each invariant.
func (c *Checker) Counts() map[Invariant]int {
	out := make(map[Invariant]int, len(c.counts))
	for k, v := range c.counts {
		out[k] = v
	}
	return out
}

// Details returns the recorded violations in the order they were found.
func (c *Checker) Details() []Violation { return append([]Violation(nil), c.details...) }

// Before returns the number of breaches found before the measured part of
// the run (the warm-up).
func (c *Checker) Before() map[Invariant]int {
	out := make(map[Invariant]int, len(c.before))
	for k, v := range c.before {
		out[k] = v
	}
	return out
}

// Rejected is the number of checkpoint writes the store refused.
func (c *Checker) Rejected() int64 { return c.rejected }

// Failed reports whether any invariant was breached.
func (c *Checker) Failed() bool {
	for _, n := range c.counts {
		if n > 0 {
			return true
		}
	}
	return false
}
