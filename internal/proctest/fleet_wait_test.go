package proctest

// Waiting on the fleet, its counts, and the intervals of ownership its events show.

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"time"
)

// waitFor polls cond (called with the model locked) until it holds, and
// returns how long that took. It fails the test at the deadline, or at once
// if a child exits unexpectedly.
func (f *fleet) waitFor(what string, timeout time.Duration, cond func() (bool, string)) time.Duration {
	f.t.Helper()
	begin := time.Now()
	deadline := begin.Add(timeout)
	for {
		f.mu.Lock()
		ok, detail := cond()
		bad := f.unexpectedExitLocked()
		f.mu.Unlock()
		if ok {
			return time.Since(begin)
		}
		if bad != "" {
			f.t.Fatalf("waiting for %s: %s", what, bad)
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("waiting for %s: not reached within %v: %s", what, timeout, detail)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// balancedLocked: every partition is run by exactly one child, each of them
// in members, and each member runs its fair share give or take tol.
func (f *fleet) balancedLocked(members []string, tol int) (bool, string) {
	counts := map[string]int{}
	for i := range f.partitions {
		p := strconv.Itoa(i)
		rs := f.running[p]
		if len(rs) != 1 {
			return false, fmt.Sprintf("partition %s is run by %d children (%v); counts so far %v", p, len(rs), keys(rs), counts)
		}
		for m := range rs {
			if !slices.Contains(members, m) {
				return false, fmt.Sprintf("partition %s is run by %s, not one of %v", p, m, members)
			}
			counts[m]++
		}
	}
	lo, hi := f.partitions/len(members)-tol, (f.partitions+len(members)-1)/len(members)+tol
	for _, m := range members {
		if counts[m] < lo || counts[m] > hi {
			return false, fmt.Sprintf("counts %v, want each in [%d, %d]", counts, lo, hi)
		}
	}
	return true, fmt.Sprintf("counts %v", counts)
}

// waitBalanced waits until the fleet is balanced over members (each
// within tol of its share) and no handler started or stopped for 300ms.
func (f *fleet) waitBalanced(what string, members []string, tol int, timeout time.Duration) time.Duration {
	f.t.Helper()
	return f.waitFor(what, timeout, func() (bool, string) {
		ok, detail := f.balancedLocked(members, tol)
		if !ok {
			return false, detail
		}
		if quiet := time.Since(f.lastChange); quiet < 300*time.Millisecond {
			return false, "not quiet yet; " + detail
		}
		return true, detail
	})
}

// counts is the number of partitions each member runs.
func (f *fleet) counts() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.countsLocked()
}

// countsLocked is counts, with f.mu held.
func (f *fleet) countsLocked() map[string]int {
	counts := map[string]int{}
	for _, rs := range f.running {
		for m := range rs {
			counts[m]++
		}
	}
	return counts
}

// claimsOfLocked is what member runs now: partition -> epoch.
func (f *fleet) claimsOfLocked(member string) map[string]uint64 {
	out := map[string]uint64{}
	for p, rs := range f.running {
		if r, ok := rs[member]; ok {
			out[p] = r.epoch
		}
	}
	return out
}

// snapshotEvents copies the events received so far.
func (f *fleet) snapshotEvents() []event {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.events)
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// claimKey names one ownership run: a handler of member for partition at
// epoch.
type claimKey struct {
	member, partition string
	epoch             uint64
}

// interval is when one claim's handler ran, by the children's clocks.
type interval struct {
	claimKey
	start, end int64 // end: stop event, else the child's exit, else +inf
}

// intervals builds the handler runs from the events.
func (f *fleet) intervals() map[string][]interval {
	f.mu.Lock()
	defer f.mu.Unlock()
	byKey := map[claimKey]*interval{}
	var order []claimKey
	for _, ev := range f.events {
		k := claimKey{ev.Member, ev.Partition, ev.Epoch}
		switch ev.Ev {
		case "start":
			if _, ok := byKey[k]; !ok {
				byKey[k] = &interval{claimKey: k, start: ev.T, end: math.MaxInt64}
				order = append(order, k)
			}
		case "stop":
			if iv, ok := byKey[k]; ok {
				iv.end = ev.T
			}
		}
	}
	out := map[string][]interval{}
	for _, k := range order {
		iv := byKey[k]
		if iv.end == math.MaxInt64 {
			if d, ok := f.dead[k.member]; ok {
				iv.end = d
			}
		}
		out[k.partition] = append(out[k.partition], *iv)
	}
	return out
}

// checkExclusive asserts that at most one child ran each partition at any
// time, by the children's timestamps (one machine, so one clock), leaving
// out the runs exempt says to.
func (f *fleet) checkExclusive(exempt func(interval) bool) {
	f.t.Helper()
	bad := 0
	checked := 0
	for p, ivs := range f.intervals() {
		ivs = slices.DeleteFunc(ivs, func(iv interval) bool { return exempt != nil && exempt(iv) })
		sort.Slice(ivs, func(i, j int) bool { return ivs[i].start < ivs[j].start })
		checked += len(ivs)
		for i := 1; i < len(ivs); i++ {
			for j := 0; j < i; j++ {
				if ivs[i].start < ivs[j].end {
					bad++
					if bad <= 10 {
						f.t.Errorf("partition %s run by two children at once: %s epoch %d [%s, %s] and %s epoch %d from %s",
							p, ivs[j].member, ivs[j].epoch, ts(ivs[j].start), ts(ivs[j].end), ivs[i].member, ivs[i].epoch, ts(ivs[i].start))
					}
				}
			}
		}
	}
	if bad == 0 {
		f.t.Logf("exclusivity: %d handler runs checked, never two on one partition at once", checked)
	} else {
		f.t.Errorf("exclusivity: %d overlaps", bad)
	}
}

func ts(ns int64) string {
	if ns == math.MaxInt64 {
		return "still running"
	}
	return time.Unix(0, ns).Format("15:04:05.000000")
}
