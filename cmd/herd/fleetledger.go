package main

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ledger is who runs which partition in a fleet of member processes, as
// their reports say: each handler start and stop with the time the member
// saw it. Partitions are numbered 0 to n-1, members by their index in the
// fleet. Not safe for concurrent use (the fleet holds its lock).
type ledger struct {
	holders [][]int32 // per partition: members running its handler
	last    []int32   // per partition: the member that last started it, -1 none
	sole    []int     // per member: partitions it alone runs
	single  int       // partitions run by exactly one member
	latest  int64     // the latest time of an event applied (Unix ns)

	// The step being measured: its events, and each touched partition's
	// state before its first event.
	events []ledgerEvent
	before map[int32]partState
}

type ledgerEvent struct {
	at     int64
	p, m   int32
	starts bool
}

type partState struct {
	total int
	last  int32
}

func newLedger(partitions int) *ledger {
	l := &ledger{holders: make([][]int32, partitions), last: make([]int32, partitions), before: map[int32]partState{}}
	for i := range l.last {
		l.last[i] = -1
	}
	return l
}

func (l *ledger) member(m int32) {
	for int(m) >= len(l.sole) {
		l.sole = append(l.sole, 0)
	}
}

// apply records that member m started (or stopped) partition p at time at.
func (l *ledger) apply(m, p int32, starts bool, at int64) {
	if int(p) < 0 || int(p) >= len(l.holders) {
		return
	}
	l.member(m)
	if _, ok := l.before[p]; !ok {
		l.before[p] = partState{total: len(l.holders[p]), last: l.last[p]}
	}
	l.events = append(l.events, ledgerEvent{at: at, p: p, m: m, starts: starts})
	l.latest = max(l.latest, at)
	h := l.holders[p]
	if len(h) == 1 {
		l.single--
		l.sole[h[0]]--
	}
	if starts {
		h = append(h, m)
		l.last[p] = m
	} else if i := slices.Index(h, m); i >= 0 {
		h = slices.Delete(h, i, i+1)
	}
	l.holders[p] = h
	if len(h) == 1 {
		l.single++
		l.sole[h[0]]++
	}
}

// drop stops every handler of member m at time at (its process was killed:
// it reports nothing more).
func (l *ledger) drop(m int32, at int64) {
	for p, h := range l.holders {
		if slices.Contains(h, m) {
			l.apply(m, int32(p), false, at)
		}
	}
}

// balanced says whether every partition runs on exactly one of live, and
// every member of live runs floor or ceil of an even share.
func (l *ledger) balanced(live []int32) bool {
	n := len(l.holders)
	if l.single != n || len(live) == 0 {
		return false
	}
	lo, hi := n/len(live), (n+len(live)-1)/len(live)
	sum := 0
	for _, m := range live {
		l.member(m)
		if l.sole[m] < lo || l.sole[m] > hi {
			return false
		}
		sum += l.sole[m]
	}
	return sum == n
}

// unbalanced says what keeps the fleet from being balanced: partitions
// that run nowhere or on more than one member, and the share of each member
// of live.
func (l *ledger) unbalanced(live []int32, name func(int32) string) string {
	nowhere, more := 0, 0
	for _, h := range l.holders {
		switch {
		case len(h) == 0:
			nowhere++
		case len(h) > 1:
			more++
		}
	}
	var shares []string
	for _, m := range live {
		l.member(m)
		shares = append(shares, name(m)+" "+strconv.Itoa(l.sole[m]))
	}
	return fmt.Sprintf("%d partitions run nowhere, %d on more than one member; alone: %s", nowhere, more, strings.Join(shares, ", "))
}

// owners maps each partition run by exactly one member to its name.
func (l *ledger) owners(name func(int32) string) map[string]string {
	out := make(map[string]string, l.single)
	for p, h := range l.holders {
		if len(h) == 1 {
			out[strconv.Itoa(p)] = name(h[0])
		}
	}
	return out
}

// reset starts a new step.
func (l *ledger) reset() {
	l.events = l.events[:0]
	clear(l.before)
}

// sweep replays the step's events in the order the members saw them and
// returns the moves (a partition started on a member other than the one
// that last started it) and the most members that ran one partition at
// once.
func (l *ledger) sweep() (moves, maxConcurrent int) {
	evs := slices.Clone(l.events)
	// In time order; at the same microsecond, in the order they arrived (a
	// member's own events in the order it saw them).
	slices.SortStableFunc(evs, func(a, b ledgerEvent) int { return cmp.Compare(a.at, b.at) })
	state := make(map[int32]partState, len(l.before))
	for p, s := range l.before {
		state[p] = s
		maxConcurrent = max(maxConcurrent, s.total)
	}
	for _, e := range evs {
		s := state[e.p]
		if e.starts {
			if s.last >= 0 && s.last != e.m {
				moves++
			}
			s.last = e.m
			s.total++
			maxConcurrent = max(maxConcurrent, s.total)
		} else if s.total > 0 {
			s.total--
		}
		state[e.p] = s
	}
	return moves, maxConcurrent
}

// takeover returns how long after from every partition that a member
// killed in the step ran (dead) had started again on a member that was not
// killed: the takeover time of a crash. ok is false if no killed member
// ran a partition, or one of them has not started again.
func (l *ledger) takeover(dead func(m int32) bool, from int64) (d time.Duration, ok bool) {
	orphans := map[int32]int64{} // partition -> its first start elsewhere (0: none yet)
	for _, e := range l.events {
		if !e.starts && dead(e.m) {
			orphans[e.p] = 0
		}
	}
	for _, e := range l.events {
		if at, orphan := orphans[e.p]; orphan && e.starts && !dead(e.m) && e.at >= from && (at == 0 || e.at < at) {
			orphans[e.p] = e.at
		}
	}
	var last int64
	for _, at := range orphans {
		if at == 0 {
			return 0, false
		}
		last = max(last, at)
	}
	return time.Duration(last - from), len(orphans) > 0
}
