package balance

import (
	"cmp"
	"fmt"
	"math/big"
	"math/bits"
	"slices"
	"strings"
)

// Member is a member of the fleet. Weight is its capacity; a Weight <= 0
// counts as 1.
type Member struct {
	ID     string
	Weight int
}

// Partition is a unit of work to be owned by exactly one member. Weight <= 0
// counts as 1. Partition weights are carried for later use; balancing is
// currently by partition count.
type Partition struct {
	ID     string
	Weight int
}

// Input is one snapshot of the fleet.
type Input struct {
	Members    []Member
	Partitions []Partition
	// Owners maps a partition ID to the member ID of its current live owner.
	// Entries for unknown members or unknown partitions are ignored.
	Owners map[string]string
}

// Assign returns the target owner (member ID) of every partition in
// in.Partitions. It returns an empty map if there are no members. See the
// package documentation for the algorithm and its guarantees.
func Assign(in Input) map[string]string {
	p := prepare(in)
	if len(p.members) == 0 {
		return map[string]string{}
	}
	var w work
	target := w.assign(p, nil)
	out := make(map[string]string, len(p.parts))
	for i, m := range target {
		if m >= 0 {
			out[p.parts[i].id] = p.members[m].id
		}
	}
	return out
}

// Assigner computes the assignments Assign computes, from sorted slices and
// owner indices instead of maps, and keeps its working memory from one call
// to the next. It is for a caller that recomputes the assignment of a large
// group after every change, as each herd member does: with 1,000 members and
// 100,000 partitions it is an order of magnitude faster than Assign and,
// once warm, allocates only the members' quotas. The zero value is ready to
// use. An Assigner is not safe for concurrent use.
type Assigner struct {
	p     problem
	w     work
	valid bool // p.parts holds the sorted partitions of the last call
}

// AssignSorted is Assign for this input: members sorted by ID with no
// duplicates, partitions sorted by ID with no duplicates, and owner[i] the
// index in members of the current owner of partitions[i], or -1 if it has
// none (any other value is read as -1). It stores in target[i] the index in
// members of the target owner of partitions[i] (target is grown if it is too
// short) and returns target[:len(partitions)]; with no members it returns
// an empty slice. It fails if the slices are not sorted, have duplicates or
// differ in length.
//
// The result is the one Assign returns for the same members, partitions and
// owners: target[i] == j exactly when
// Assign(in)[partitions[i].ID] == members[j].ID.
func (a *Assigner) AssignSorted(members []Member, partitions []Partition, owner []int32, target []int32) ([]int32, error) {
	if len(owner) != len(partitions) {
		return nil, fmt.Errorf("balance: %d owners for %d partitions", len(owner), len(partitions))
	}
	for i := 1; i < len(members); i++ {
		if members[i-1].ID >= members[i].ID {
			return nil, fmt.Errorf("balance: members not sorted by ID without duplicates at %q, %q", members[i-1].ID, members[i].ID)
		}
	}
	p := &a.p
	p.members = p.members[:0]
	for _, m := range members {
		p.members = append(p.members, newMember(m))
	}
	p.held = resize(p.held, len(members))
	clear(p.held)
	p.owned = 0
	// The partition set rarely changes between calls: an ID found at the
	// same index last time (when the set was found sorted) keeps its hash,
	// and only pairs with a new ID need comparing to check the order.
	prev := p.parts
	if !a.valid {
		prev = nil
	}
	a.valid = false
	if len(partitions) != len(p.parts) || prev == nil {
		a.w.idealOK = false
	}
	p.parts = resize(p.parts, len(partitions))
	n := int32(len(members))
	same := false // partitions[i-1] is the ID found at i-1 last time
	for i, pt := range partitions {
		o := owner[i]
		if o < 0 || o >= n {
			o = -1
		} else {
			p.held[o]++
			p.owned++
		}
		var h uint64
		if i < len(prev) && prev[i].id == pt.ID {
			h = prev[i].h
			if i > 0 && !same && partitions[i-1].ID >= pt.ID {
				return nil, fmt.Errorf("balance: partitions not sorted by ID without duplicates at %q, %q", partitions[i-1].ID, pt.ID)
			}
			same = true
		} else {
			a.w.idealOK = false // the partition set changed
			h = hashString(pt.ID)
			if i > 0 && partitions[i-1].ID >= pt.ID {
				return nil, fmt.Errorf("balance: partitions not sorted by ID without duplicates at %q, %q", partitions[i-1].ID, pt.ID)
			}
			same = false
		}
		p.parts[i] = part{id: pt.ID, h: h, owner: o}
	}
	a.valid = true
	if len(members) == 0 {
		return target[:0], nil
	}
	return a.w.assign(p, target), nil
}

// work is the scratch memory of one assignment.
type work struct {
	kept  []int
	over  [][]int32
	pool  []int32
	slots []slot
	ring  []slot
	buf   []slot
	next  []int32
	all   []int32
	// ringAll: every partition in ring order (see ringOrder), cached with
	// the ideals while the partitions stay the same: each new membership's
	// ideal matches every partition, and sorting them by hash was a third
	// of the cost. Read-only (it may be the process's: shared.go), as are
	// the ideals' targets. fp is the partitions' fingerprint, if fpOK.
	ringAll []int32
	fp      uint64
	fpOK    bool
	// ideals: the targets of every partition without owners (the ideal)
	// for the last few memberships and quotas, most recent first; idealOK
	// is cleared by the Assigner when the partitions change (see idealOf).
	ideals  []ideal
	idealOK bool
	// The fill ring (fill.go), cached while the members (ringFor) stay
	// the same, and the members' room.
	vring   []vnode
	vindex  []int32
	vseen   []int32
	ringFor []member
	room    []int
}

// slot is one missing unit k of member m, at ring position pos.
type slot struct {
	pos uint64
	m   int32
	k   int32
}

// assign computes the target of every partition of p (which has members):
// target[i] is the index in p.members of the target owner of p.parts[i],
// or -1 if none (never, see below). target is reused if it is long enough.
func (w *work) assign(p *problem, target []int32) []int32 {
	n := len(p.members)
	target = resize(target, len(p.parts))
	for i := range target {
		target[i] = -1
	}
	quota := computeQuotas(p.members, p.held, len(p.parts))

	// Sticky pass: members at or under quota keep everything they hold;
	// partitions of over-quota members are collected for ranking.
	w.kept = resize(w.kept, n)
	clear(w.kept)
	kept := w.kept
	if cap(w.over) < n {
		w.over = make([][]int32, n)
	}
	over := w.over[:n]
	for i := range over {
		over[i] = over[i][:0]
	}
	pool := w.pool[:0]
	for pi := range p.parts {
		pt := &p.parts[pi]
		o := pt.owner
		switch {
		case o < 0:
			pool = append(pool, int32(pi))
		case p.held[o] <= quota[o]:
			target[pi] = o
			kept[o]++
		default:
			over[o] = append(over[o], int32(pi))
		}
	}

	// Over-quota members keep their quota partitions with the highest
	// rendezvous score and free the rest.
	for o, list := range over {
		if len(list) == 0 {
			continue
		}
		// Higher score first (ranked by its complement), then by ID. Only
		// which partitions are among the first q matters, not their order
		// (the pool is put in ring order below): a selection, not a sort
		// (sorting every over-quota member's partitions was a third of
		// the time of a plan of 110 members on 100,000 partitions).
		q := quota[o]
		if q > 0 {
			key := p.members[o].key
			ranked := resize(w.ring, len(list))[:0]
			for _, pi := range list {
				ranked = append(ranked, slot{pos: ^score(p.parts[pi].h, key), m: pi})
			}
			w.ring = ranked
			selectSlots(ranked, q, func(a, b slot) int {
				return strings.Compare(p.parts[a.m].id, p.parts[b.m].id)
			})
			for i := range ranked {
				list[i] = ranked[i].m
			}
			for _, pi := range list[:q] {
				target[pi] = int32(o)
			}
		}
		kept[o] = q
		pool = append(pool, list[q:]...)
	}
	w.pool = pool

	if len(pool) == 0 {
		return target
	}

	if len(pool) < len(p.parts) {
		// Some partitions stay where they are. Pool partitions go first to
		// the member the assignment from nothing would give them (the
		// ideal), while it has room: then a fleet that is still filling up
		// an assignment (claims under way) is given the same assignment
		// again, rather than a new spread of what is left, on which members
		// that read the group at different moments would disagree. Any
		// matching of the pool moves the same partitions (the pool is what
		// moves), so this keeps the moves minimal.
		ideal := w.idealOf(p, quota)
		w.poolOrder(p, pool) // which partitions get a member's room must not depend on input order
		rest := pool[:0]
		for _, pi := range pool {
			if m := ideal[pi]; m >= 0 && kept[m] < quota[m] {
				target[pi] = m
				kept[m]++
				continue
			}
			rest = append(rest, pi)
		}
		pool = rest
		if len(pool) == 0 {
			return target
		}
		w.fill(p, pool, quota, kept, target) // pool is in ring order
		return target
	}
	// Nothing is kept: the target is the ideal.
	copy(target, w.idealOf(p, quota))
	return target
}

// ideal is the target of every partition without owners for members and
// quotas.
type ideal struct {
	members []member
	quota   []int
	target  []int32
}

// maxIdeals is how many ideals an Assigner keeps: a member that plans at
// different moments of a rebalance (again after a session expired, or
// while joiners arrive one by one) sees two or three memberships in turn,
// and computing an ideal was 7% of the CPU of 100 members on 100,000
// partitions (measured with the members in one process) when only the
// last was kept.
const maxIdeals = 4

// idealOf returns the ideal for p's members and quota: cached while the
// partitions stay the same, computed otherwise (a matching of every
// partition, O(P log P)). The caller must not change it.
func (w *work) idealOf(p *problem, quota []int) []int32 {
	if !w.idealOK {
		w.ideals = w.ideals[:0]
		w.ringAll = nil
		w.fpOK = false
		w.idealOK = true
	}
	for i, c := range w.ideals {
		if slices.Equal(c.members, p.members) && slices.Equal(c.quota, quota) {
			copy(w.ideals[1:i+1], w.ideals[:i]) // most recent first
			w.ideals[0] = c
			return c.target
		}
	}
	if !w.fpOK {
		w.fp, w.fpOK = fingerprint(p.parts), true
	}
	target, ring, set := sharedIdeal(p, w.fp, quota)
	if ring != nil && w.ringAll == nil {
		w.ringAll = ring
	}
	c := ideal{members: slices.Clone(p.members), quota: slices.Clone(quota), target: target}
	if target == nil {
		if len(w.ringAll) != len(p.parts) {
			all := make([]int32, len(p.parts))
			for pi := range all {
				all[pi] = int32(pi)
			}
			w.ringOrder(p, all)
			w.ringAll = all
		}
		// New memory: the shared ideal, and w.ringAll, are read-only.
		pool := append(resize(w.all, len(p.parts))[:0], w.ringAll...)
		w.all = pool
		c.target = make([]int32, len(p.parts))
		w.match(p, pool, quota, c.target)
		publishIdeal(set, c, w.ringAll)
	}
	if len(w.ideals) == maxIdeals {
		w.ideals = w.ideals[:maxIdeals-1]
	}
	w.ideals = slices.Insert(w.ideals, 0, c)
	return c.target
}

// match places the partitions of pool (indices into p.parts) on the
// members' quota units: one slot per unit k below quota[m] of each member
// m, on a hash ring, and each pool partition, in ring order, takes the
// first free slot clockwise from its position (consistent hashing with
// bounded loads). The pool must be in ring order (ringOrder) and have as
// many partitions as there are units. It sets target[pi] for every pi in
// pool.
func (w *work) match(p *problem, pool []int32, quota []int, target []int32) {
	slots := resize(w.slots, len(pool))[:0]
	for m := range p.members {
		for k := 0; k < quota[m]; k++ {
			slots = append(slots, slot{pos: slotPos(p.members[m].h, k), m: int32(m), k: int32(k)})
		}
	}
	w.slots = slots
	w.buf = sortSlots(slots, w.buf, func(a, b slot) int {
		if c := cmp.Compare(a.m, b.m); c != 0 {
			return c
		}
		return cmp.Compare(a.k, b.k)
	})

	// Walk the pool in ring order; each partition takes the first free slot
	// at or after its ring position, wrapping around.
	S := len(slots)
	free := w.nextFree(S)
	j := 0
	for _, pi := range pool {
		pt := &p.parts[pi]
		for j < S && slots[j].pos < pt.h {
			j++
		}
		s := free.clockwise(j)
		if int(s) == S {
			// Unreachable: there are exactly as many slots as pool
			// partitions. Kept so odd input can never cause a panic.
			target[pi] = -1
			continue
		}
		target[pi] = slots[s].m
		free.take(s)
	}
}

// nextFree is a union-find "next free position" array over n positions and
// a sentinel n.
type nextFree []int32

// nextFree returns w's nextFree array over n positions, every one free.
func (w *work) nextFree(n int) nextFree {
	w.next = resize(w.next, n+1)
	for i := range w.next {
		w.next[i] = int32(i)
	}
	return nextFree(w.next)
}

// find returns the first free position at or after i (n if none).
func (f nextFree) find(i int32) int32 {
	for f[i] != i {
		f[i] = f[f[i]] // path halving
		i = f[i]
	}
	return i
}

// clockwise returns the first free position at or after i, wrapping around
// to 0 (n if none is free).
func (f nextFree) clockwise(i int) int32 {
	n := int32(len(f) - 1)
	s := f.find(int32(i))
	if s == n {
		s = f.find(0)
	}
	return s
}

// take marks position i used.
func (f nextFree) take(i int32) { f[i] = i + 1 }

// poolOrder puts pool (indices into p.parts, each once) in ring order, as
// ringOrder does: a large pool (a first placement's: every partition not
// yet claimed) is picked out of the ring order of every partition, which
// idealOf left in w.ringAll, in O(P) instead of sorted again.
func (w *work) poolOrder(p *problem, pool []int32) {
	if len(pool) < len(p.parts)/8 || len(w.ringAll) != len(p.parts) {
		w.ringOrder(p, pool)
		return
	}
	in := resize(w.next, len(p.parts)) // scratch: nextFree is not in use
	w.next = in
	clear(in)
	for _, pi := range pool {
		in[pi] = 1
	}
	pool = pool[:0]
	for _, pi := range w.ringAll {
		if in[pi] != 0 {
			pool = append(pool, pi)
		}
	}
}

// ringOrder sorts pool (indices into p.parts) in ring order: by hash, then
// ID, whatever the order of the input.
func (w *work) ringOrder(p *problem, pool []int32) {
	ring := resize(w.ring, len(pool))[:0]
	for _, pi := range pool {
		ring = append(ring, slot{pos: p.parts[pi].h, m: pi})
	}
	w.ring = ring
	w.buf = sortSlots(ring, w.buf, func(a, b slot) int {
		return strings.Compare(p.parts[a.m].id, p.parts[b.m].id)
	})
	for i := range ring {
		pool[i] = ring[i].m
	}
}

// sortSlots sorts s by pos, then by tie (which is called only for equal
// positions), using buf as scratch; it returns the scratch for reuse. The
// order is that of slices.SortFunc with the same comparison: large inputs
// are sorted by a stable LSD radix sort on pos, then each run of equal
// positions by tie.
func sortSlots(s, buf []slot, tie func(a, b slot) int) []slot {
	if len(s) < 256 {
		slices.SortFunc(s, func(a, b slot) int {
			if c := cmp.Compare(a.pos, b.pos); c != 0 {
				return c
			}
			return tie(a, b)
		})
		return buf
	}
	const bits = 11
	const buckets = 1 << bits
	buf = resize(buf, len(s))
	src, dst := s, buf
	var count [buckets]int
	for shift := uint(0); shift < 64; shift += bits {
		clear(count[:])
		for i := range src {
			count[(src[i].pos>>shift)&(buckets-1)]++
		}
		if count[(src[0].pos>>shift)&(buckets-1)] == len(src) {
			continue // every key has this digit: the pass would not move anything
		}
		sum := 0
		for b, c := range count {
			count[b] = sum
			sum += c
		}
		for i := range src {
			d := (src[i].pos >> shift) & (buckets - 1)
			dst[count[d]] = src[i]
			count[d]++
		}
		src, dst = dst, src
	}
	if &src[0] != &s[0] {
		copy(s, src)
	}
	for i := 0; i < len(s); {
		j := i + 1
		for j < len(s) && s[j].pos == s[i].pos {
			j++
		}
		if j-i > 1 {
			slices.SortFunc(s[i:j], tie)
		}
		i = j
	}
	return buf
}

// selectSlots reorders s so that s[:k] holds its k least slots, by pos and
// then by tie (called only for equal positions), in no particular order:
// the same slots as sorting s would put there. It is a quickselect with a
// three-way partition around the median of three, O(len(s)) on the hash
// positions it is given.
func selectSlots(s []slot, k int, tie func(a, b slot) int) {
	c := func(a, b slot) int {
		if d := cmp.Compare(a.pos, b.pos); d != 0 {
			return d
		}
		return tie(a, b)
	}
	lo, hi := 0, len(s)
	for hi-lo > 1 && lo < k && k < hi {
		a, b, d := s[lo], s[lo+(hi-lo)/2], s[hi-1]
		if c(a, b) > 0 {
			a, b = b, a
		}
		if c(b, d) > 0 {
			b = d
			if c(a, b) > 0 {
				b = a
			}
		}
		pivot := b // the median of a, b, d
		// s[lo:lt] < pivot, s[lt:i] == pivot, s[gt:hi] > pivot.
		lt, i, gt := lo, lo, hi
		for i < gt {
			switch x := c(s[i], pivot); {
			case x < 0:
				s[lt], s[i] = s[i], s[lt]
				lt++
				i++
			case x > 0:
				gt--
				s[i], s[gt] = s[gt], s[i]
			default:
				i++
			}
		}
		switch {
		case k < lt:
			hi = lt
		case k > gt:
			lo = gt
		default:
			return // s[:k] is s[:lt] and some slots equal to the pivot
		}
	}
}

// resize returns s with length n, reallocated only if its capacity is short.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// Quotas returns how many partitions each member should own, keyed by member
// ID. These are the quotas Assign uses. The map is empty if there are no
// members.
func Quotas(in Input) map[string]int {
	p := prepare(in)
	quota := computeQuotas(p.members, p.held, len(p.parts))
	out := make(map[string]int, len(p.members))
	for i, m := range p.members {
		out[m.id] = quota[i]
	}
	return out
}

// Moves counts the partitions of in whose target owner differs from a valid
// current owner (see Input.Owners). Unowned partitions, and partitions whose
// current owner is not a known member, are not moves. A partition missing
// from target counts as a move if it has a valid owner.
func Moves(in Input, target map[string]string) int {
	p := prepare(in)
	moves := 0
	for i := range p.parts {
		pt := &p.parts[i]
		if pt.owner >= 0 && target[pt.id] != p.members[pt.owner].id {
			moves++
		}
	}
	return moves
}

// MinMoves is the smallest number of moves (as counted by Moves) that any
// fair assignment of in needs, where fair means every member gets floor or
// ceil of its weighted share. Moves(in, Assign(in)) == MinMoves(in).
//
// A member that holds h partitions and is given quota q can keep at most
// min(h, q) of them, and every other validly owned partition must move; the
// quotas from Quotas maximise the sum of min(h, q) over all fair quota
// vectors, and Assign achieves it.
func MinMoves(in Input) int {
	p := prepare(in)
	quota := computeQuotas(p.members, p.held, len(p.parts))
	keep := 0
	for i := range p.members {
		keep += min(p.held[i], quota[i])
	}
	return p.owned - keep
}

type member struct {
	id     string
	weight int
	h      uint64 // hash of id
	key    uint64 // derived from h, for rendezvous scores
}

type part struct {
	id    string
	h     uint64 // hash of id (ring position)
	owner int32  // index into problem.members, or -1 if no valid owner
}

func newMember(m Member) member {
	w := m.Weight
	if w <= 0 {
		w = 1
	}
	h := hashString(m.ID)
	return member{id: m.ID, weight: w, h: h, key: mix64(h ^ keySalt)}
}

// problem is the normalised form of an Input.
type problem struct {
	members []member // de-duplicated, sorted by id
	parts   []part   // de-duplicated, in first-occurrence order
	held    []int    // per member: number of partitions validly owned
	owned   int      // number of partitions with a valid owner
}

func prepare(in Input) *problem {
	p := &problem{}

	// Members: first occurrence wins, then sort by ID so that indices are
	// independent of input order.
	seenM := make(map[string]struct{}, len(in.Members))
	for _, m := range in.Members {
		if _, dup := seenM[m.ID]; dup {
			continue
		}
		seenM[m.ID] = struct{}{}
		p.members = append(p.members, newMember(m))
	}
	slices.SortFunc(p.members, func(a, b member) int { return strings.Compare(a.id, b.id) })
	idx := make(map[string]int32, len(p.members))
	for i, m := range p.members {
		idx[m.id] = int32(i)
	}
	p.held = make([]int, len(p.members))

	// Partitions sorted by ID without duplicates (as a store returns them)
	// need no de-duplication map.
	sorted := true
	for i := 1; i < len(in.Partitions) && sorted; i++ {
		sorted = in.Partitions[i-1].ID < in.Partitions[i].ID
	}
	var seenP map[string]struct{}
	if !sorted {
		seenP = make(map[string]struct{}, len(in.Partitions))
	}
	p.parts = make([]part, 0, len(in.Partitions))
	for _, pt := range in.Partitions {
		if !sorted {
			if _, dup := seenP[pt.ID]; dup {
				continue
			}
			seenP[pt.ID] = struct{}{}
		}
		owner := int32(-1)
		if mid, ok := in.Owners[pt.ID]; ok {
			if i, ok := idx[mid]; ok {
				owner = i
				p.held[i]++
				p.owned++
			}
		}
		p.parts = append(p.parts, part{id: pt.ID, h: hashString(pt.ID), owner: owner})
	}
	return p
}

// computeQuotas apportions P partitions to members in proportion to weight.
// Every member gets floor or ceil of its exact share P*w/W; the +1 slots go
// first to members holding more than their floor, then by largest remainder,
// then by member hash and ID. Exact big-integer arithmetic is used so that
// huge weights cannot overflow.
func computeQuotas(members []member, held []int, P int) []int {
	n := len(members)
	q := make([]int, n)
	if n == 0 || P <= 0 {
		return q
	}
	// Exact shares in 128-bit arithmetic while the total weight fits in 64
	// bits (always, in practice), in big integers otherwise.
	var W uint64
	fits := true
	for _, m := range members {
		var carry uint64
		W, carry = bits.Add64(W, uint64(m.weight), 0)
		if carry != 0 {
			fits = false
			break
		}
	}
	if !fits {
		return computeQuotasBig(members, held, P)
	}
	rem := make([]uint64, n)
	sum := 0
	var cand []int
	for i, m := range members {
		hi, lo := bits.Mul64(uint64(P), uint64(m.weight))
		quo, r := bits.Div64(hi, lo, W) // quo <= P: no overflow
		q[i] = int(quo)
		rem[i] = r
		sum += q[i]
		if r != 0 {
			cand = append(cand, i)
		}
	}
	extra := min(P-sum, len(cand))
	slices.SortFunc(cand, func(a, b int) int {
		aa, ba := held[a] > q[a], held[b] > q[b]
		if aa != ba {
			if aa {
				return -1
			}
			return 1
		}
		// Remainders over the same W: comparing them compares the
		// fractional parts of the shares.
		if c := cmp.Compare(rem[b], rem[a]); c != 0 {
			return c // larger remainder first
		}
		if c := cmp.Compare(members[b].h, members[a].h); c != 0 {
			return c // higher hash first
		}
		return strings.Compare(members[a].id, members[b].id)
	})
	for _, i := range cand[:extra] {
		q[i]++
	}
	return q
}

// computeQuotasBig is computeQuotas in big integers, for total weights
// beyond 64 bits.
func computeQuotasBig(members []member, held []int, P int) []int {
	n := len(members)
	q := make([]int, n)
	if n == 0 || P <= 0 {
		return q
	}
	W := new(big.Int)
	for _, m := range members {
		W.Add(W, big.NewInt(int64(m.weight)))
	}
	bigP := big.NewInt(int64(P))
	rem := make([]*big.Int, n)
	sum := 0
	var cand []int
	for i, m := range members {
		num := new(big.Int).Mul(bigP, big.NewInt(int64(m.weight)))
		quo, r := new(big.Int).QuoRem(num, W, new(big.Int))
		q[i] = int(quo.Int64()) // 0 <= quo <= P
		rem[i] = r
		sum += q[i]
		if r.Sign() != 0 {
			cand = append(cand, i)
		}
	}
	extra := P - sum
	// The fractional parts of the shares sum to extra and are each < 1, so
	// more than extra members have one: len(cand) > extra whenever extra > 0.
	extra = min(extra, len(cand))
	slices.SortFunc(cand, func(a, b int) int {
		aa, ba := held[a] > q[a], held[b] > q[b]
		if aa != ba {
			if aa {
				return -1
			}
			return 1
		}
		if c := rem[b].Cmp(rem[a]); c != 0 {
			return c // larger remainder first
		}
		if c := cmp.Compare(members[b].h, members[a].h); c != 0 {
			return c // higher hash first
		}
		return strings.Compare(members[a].id, members[b].id)
	})
	for _, i := range cand[:extra] {
		q[i]++
	}
	return q
}

const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
	keySalt     = 0x9e3779b97f4a7c15
	slotSalt    = 0xd6e8feb86659fd93
)

// hashString is FNV-1a 64 followed by a splitmix64 finalizer (FNV alone has
// weak avalanche on short, similar IDs such as "p-0001", "p-0002").
func hashString(s string) uint64 {
	h := uint64(fnvOffset64)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime64
	}
	return mix64(h)
}

// mix64 is the splitmix64 finalizer.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// score is the rendezvous score of a partition (by hash) for a member (by key).
func score(ph, mkey uint64) uint64 { return mix64(ph ^ mkey) }

// slotPos is the ring position of the k-th quota unit of a member (by hash).
func slotPos(mh uint64, k int) uint64 {
	return mix64(mh ^ mix64(uint64(k)+slotSalt))
}
