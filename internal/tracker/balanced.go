package tracker

// Whether the handlers running are balanced, a table of them, and the minimum number of moves.

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/herdhq/herd/balance"
)

// Balanced reports whether every partition runs exactly once, on one of
// members, and every member runs floor or ceil of an even share (unit
// weights). It returns what is wrong otherwise.
func (t *Tracker) Balanced(partitions, members []string) (bool, string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if ok, why := t.mayBeBalanced(partitions, members); !ok {
		return false, why
	}
	return t.balancedLocked(partitions, members)
}

// fairRange is the floor and ceiling of an even share.
func fairRange(partitions, members int) (lo, hi int) {
	lo = partitions / members
	hi = lo
	if partitions%members != 0 {
		hi++
	}
	return lo, hi
}

// mayBeBalanced checks the counters, in O(members): if it reports false,
// the fleet is not balanced. If it reports true, only partitions outside the
// given set (running in place of some of the set) can still be wrong.
func (t *Tracker) mayBeBalanced(partitions, members []string) (bool, string) {
	if len(members) == 0 {
		return false, "no members"
	}
	if t.running != t.single {
		return false, fmt.Sprintf("%d partitions run more than one handler", t.running-t.single)
	}
	if t.single != len(partitions) {
		return false, fmt.Sprintf("%d partitions run one handler each, of %d", t.single, len(partitions))
	}
	lo, hi := fairRange(len(partitions), len(members))
	inFleet := 0
	for _, m := range members {
		c := 0
		if i, ok := t.memberIdx[m]; ok {
			c = t.sole[i]
		}
		if c < lo || c > hi {
			return false, fmt.Sprintf("member %s runs %d partitions, fair is %d..%d", m, c, lo, hi)
		}
		inFleet += c
	}
	if inFleet != t.single {
		return false, fmt.Sprintf("%d partitions run on members outside the fleet", t.single-inFleet)
	}
	return true, ""
}

// balancedLocked walks the partitions: each must run exactly one handler, on
// one of members, and every member must run a fair share.
func (t *Tracker) balancedLocked(partitions, members []string) (bool, string) {
	if len(members) == 0 {
		return false, "no members"
	}
	count := make(map[int32]int, len(members))
	for _, m := range members {
		if i, ok := t.memberIdx[m]; ok {
			count[i] = 0
		}
	}
	for _, p := range partitions {
		i, ok := t.partIdx[p]
		if !ok {
			return false, fmt.Sprintf("partition %s runs 0 handlers", p)
		}
		ps := &t.parts[i]
		if ps.total != 1 {
			return false, fmt.Sprintf("partition %s runs %d handlers", p, ps.total)
		}
		owner := ps.soleRunner()
		c, isMember := count[owner]
		if !isMember {
			return false, fmt.Sprintf("partition %s runs on %s, not a live member", p, t.members[owner])
		}
		count[owner] = c + 1
	}
	lo, hi := fairRange(len(partitions), len(members))
	for _, m := range members {
		c := 0
		if i, ok := t.memberIdx[m]; ok {
			c = count[i]
		}
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
		ok, why := t.mayBeBalanced(partitions, members)
		if ok {
			ok, why = t.balancedLocked(partitions, members)
		}
		if ok {
			t.mu.Unlock()
			return nil
		}
		if t.changed == nil {
			t.changed = make(chan struct{})
		}
		ch := t.changed
		t.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("not balanced: %s: %w", why, ctx.Err())
		}
	}
}

// tableMax is the most partitions Table lists for one member.
const tableMax = 32

// Table renders who runs what: one line per member with its count and
// partitions, sorted (the first tableMax of them).
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
		n, more := len(ps), ""
		if n > tableMax {
			more = fmt.Sprintf(" ... (%d more)", len(ps)-tableMax)
			ps = ps[:tableMax]
		}
		fmt.Fprintf(&b, "  %-10s %3d  %s%s\n", m, n, strings.Join(ps, " "), more)
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
	i, ok := t.partIdx[p]
	if !ok {
		return 0
	}
	ps := &t.parts[i]
	n := ps.total
	if ex, ok := t.memberIdx[except]; ok {
		n -= ps.count(ex)
	}
	return int(n)
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
