// Package tracker watches the handlers of an in-process fleet: which member
// runs which partition, how many handlers run at once for one partition, how
// many partitions changed member. The demo, the benchmarks and the tests use
// it to decide when a rebalance is over, from what handlers actually do
// rather than from what the store says.
package tracker

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/balance"
)

// Tracker records handler starts and stops. Safe for concurrent use.
type Tracker struct {
	mu            sync.Mutex
	live          map[string]map[string]int // partition -> member -> running handlers
	last          map[string]string         // partition -> member that last started it
	moves         int
	maxConcurrent int
	changed       chan struct{} // closed and replaced on every change
}

// New returns an empty tracker.
func New() *Tracker {
	return &Tracker{live: map[string]map[string]int{}, last: map[string]string{}, changed: make(chan struct{})}
}

// Wrap returns a handler that records member's handler runs around inner
// (nil inner: wait for cancellation).
func (t *Tracker) Wrap(member string, inner herd.Handler) herd.Handler {
	return func(c *herd.Claim) error {
		t.started(member, c.Partition)
		defer t.stopped(member, c.Partition)
		if inner == nil {
			<-c.Context().Done()
			return nil
		}
		return inner(c)
	}
}

func (t *Tracker) started(member, p string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.live[p] == nil {
		t.live[p] = map[string]int{}
	}
	t.live[p][member]++
	if prev := t.last[p]; prev != "" && prev != member {
		t.moves++
	}
	t.last[p] = member
	n := 0
	for _, c := range t.live[p] {
		n += c
	}
	t.maxConcurrent = max(t.maxConcurrent, n)
	t.notify()
}

func (t *Tracker) stopped(member, p string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.live[p][member]--
	if t.live[p][member] == 0 {
		delete(t.live[p], member)
	}
	t.notify()
}

func (t *Tracker) notify() {
	close(t.changed)
	t.changed = make(chan struct{})
}

// Reset zeroes the move counter and the concurrency maximum (not who runs
// what), to measure one step.
func (t *Tracker) Reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.moves = 0
	t.maxConcurrent = 0
	for _, m := range t.live {
		n := 0
		for _, c := range m {
			n += c
		}
		t.maxConcurrent = max(t.maxConcurrent, n)
	}
}

// Moves is how many times a partition was started on a member other than
// the one that ran it before, since the last Reset.
func (t *Tracker) Moves() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.moves
}

// MaxConcurrent is the most handlers seen running at once for one partition
// since the last Reset.
func (t *Tracker) MaxConcurrent() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.maxConcurrent
}

// Owners maps each partition with exactly one running handler to its member.
func (t *Tracker) Owners() map[string]string { return t.OwnersExcept("") }

// OwnersExcept is Owners ignoring the handlers of member except (a stalled
// member whose handlers still exist).
func (t *Tracker) OwnersExcept(except string) map[string]string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]string{}
	for p, ms := range t.live {
		n, owner := 0, ""
		for m, c := range ms {
			if m != except {
				n += c
				owner = m
			}
		}
		if n == 1 {
			out[p] = owner
		}
	}
	return out
}

// Balanced reports whether every partition runs exactly once, on one of
// members, and every member runs floor or ceil of an even share (unit
// weights). It returns what is wrong otherwise.
func (t *Tracker) Balanced(partitions, members []string) (bool, string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.balancedLocked(partitions, members)
}

func (t *Tracker) balancedLocked(partitions, members []string) (bool, string) {
	if len(members) == 0 {
		return false, "no members"
	}
	isMember := map[string]bool{}
	count := map[string]int{}
	for _, m := range members {
		isMember[m] = true
		count[m] = 0
	}
	for _, p := range partitions {
		ms := t.live[p]
		n := 0
		var owner string
		for m, c := range ms {
			n += c
			owner = m
		}
		if n != 1 {
			return false, fmt.Sprintf("partition %s runs %d handlers", p, n)
		}
		if !isMember[owner] {
			return false, fmt.Sprintf("partition %s runs on %s, not a live member", p, owner)
		}
		count[owner]++
	}
	lo := len(partitions) / len(members)
	hi := lo
	if len(partitions)%len(members) != 0 {
		hi++
	}
	for m, c := range count {
		if c < lo || c > hi {
			return false, fmt.Sprintf("member %s runs %d partitions, fair is %d..%d", m, c, lo, hi)
		}
	}
	return true, ""
}

// WaitBalanced blocks until Balanced holds or ctx ends; the error then says
// what was still wrong.
func (t *Tracker) WaitBalanced(ctx context.Context, partitions, members []string) error {
	for {
		t.mu.Lock()
		ok, why := t.balancedLocked(partitions, members)
		ch := t.changed
		t.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("not balanced: %s: %w", why, ctx.Err())
		}
	}
}

// Table renders who runs what: one line per member with its count and
// partitions, sorted.
func (t *Tracker) Table(members []string) string {
	owners := t.Owners()
	byMember := map[string][]string{}
	for p, m := range owners {
		byMember[m] = append(byMember[m], p)
	}
	var b strings.Builder
	for _, m := range members {
		ps := byMember[m]
		sort.Slice(ps, func(i, j int) bool { return lessNatural(ps[i], ps[j]) })
		fmt.Fprintf(&b, "  %-10s %3d  %s\n", m, len(ps), strings.Join(ps, " "))
	}
	return b.String()
}

// lessNatural orders "2" before "10".
func lessNatural(a, b string) bool {
	if len(a) != len(b) && isDigits(a) && isDigits(b) {
		return len(a) < len(b)
	}
	return a < b
}

func isDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}

// Runners counts the handlers running partition p on members other than except.
func (t *Tracker) Runners(p, except string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for m, c := range t.live[p] {
		if m != except {
			n += c
		}
	}
	return n
}

// MinMoves is the fewest partitions that must change member to go from
// before (partition -> member) to a fair spread of parts over after: the
// partitions of members that are gone, plus balance.MinMoves for the rest.
func MinMoves(parts []string, before map[string]string, after []string) int {
	in := balance.Input{Owners: map[string]string{}}
	for _, m := range after {
		in.Members = append(in.Members, balance.Member{ID: m, Weight: 1})
	}
	gone := 0
	for _, p := range parts {
		in.Partitions = append(in.Partitions, balance.Partition{ID: p, Weight: 1})
		owner, ok := before[p]
		switch {
		case !ok:
		case slices.Contains(after, owner):
			in.Owners[p] = owner
		default:
			gone++
		}
	}
	return gone + balance.MinMoves(in)
}
