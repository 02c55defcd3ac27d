package balance

import (
	"fmt"
	"strings"
	"unsafe"
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
	p.owner = resize(p.owner, len(partitions))
	// An ID found at the same index of the same array is left in place:
	// nothing is written (a pointer written is a write barrier while the
	// collector runs).
	inPlace := len(prev) > 0 && len(p.parts) > 0 && &prev[0] == &p.parts[0]
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
		p.owner[i] = o
		if i < len(prev) && sameString(prev[i].id, pt.ID) {
			if i > 0 && !same && partitions[i-1].ID >= pt.ID {
				return nil, fmt.Errorf("balance: partitions not sorted by ID without duplicates at %q, %q", partitions[i-1].ID, pt.ID)
			}
			same = true
			if !inPlace {
				p.parts[i] = prev[i]
			}
			continue
		}
		a.w.idealOK = false // the partition set changed
		if i > 0 && partitions[i-1].ID >= pt.ID {
			return nil, fmt.Errorf("balance: partitions not sorted by ID without duplicates at %q, %q", partitions[i-1].ID, pt.ID)
		}
		same = false
		p.parts[i] = part{id: pt.ID, h: hashString(pt.ID)}
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
	over  [][]slot // per member over quota: its partitions (m) and their ranks (pos)
	pool  []int32
	ring  []slot
	buf   []slot
	next  []int32
	taken []uint64 // match's bitmap of slots taken
	// ringAll: every partition in ring order (see ringOrder), and ringH
	// their hashes in that order, cached with the ideals while the
	// partitions stay the same: each new membership's ideal matches every
	// partition, and sorting them by hash was a third of the cost.
	ringAll []int32
	ringH   []uint64
	// ideals: the targets of every partition without owners (the ideal)
	// for the last few memberships and quotas, most recent first; idealOK
	// is cleared by the Assigner when the partitions change (see idealOf).
	ideals  []ideal
	idealOK bool
	// The last ideal's slots, from which the next one's are made.
	slotRing slotRing
	// The fill ring (fill.go), cached while the members (ringFor) stay
	// the same, and the members' room.
	vring   []vnode
	vindex  []int32
	vseen   []int32
	ringFor []member
	room    []int
	short   []bool // placeOnIdeal's
}

// overQuota reports whether a member holds more than its quota.
func overQuota(held, quota []int) bool {
	for m, h := range held {
		if h > quota[m] {
			return true
		}
	}
	return false
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
	if len(p.parts) == 0 {
		return target
	}
	quota := computeQuotas(p.members, p.held, len(p.parts))
	switch {
	case p.owned == 0:
		// Nothing is kept: the target is the ideal (the passes below
		// would pool every partition and come to the same).
		copy(target, w.idealOf(p, quota))
		return target
	case p.owned == len(p.parts) && !overQuota(p.held, quota):
		// Everything is kept where it is (a balanced group: the sticky
		// pass below would keep each partition and pool none).
		copy(target, p.owner)
		return target
	}
	for i := range target {
		target[i] = -1
	}

	// Sticky pass: members at or under quota keep everything they hold;
	// partitions of over-quota members are collected for ranking.
	w.kept = resize(w.kept, n)
	clear(w.kept)
	kept := w.kept
	if cap(w.over) < n {
		w.over = make([][]slot, n)
	}
	// Each list and the pool sized at once: a member plans only a few
	// times in its life, and lists grown by appends from empty were copied
	// log2(n) times each (growslice was 0.9 s of 33 s of CPU of 100 member
	// processes on 100,000 partitions, in a CPU profile).
	over := w.over[:n]
	for i := range over {
		if h := p.held[i]; h > quota[i] && cap(over[i]) < h {
			over[i] = make([]slot, 0, h) // an over-quota member's list: all it holds
		}
		over[i] = over[i][:0]
	}
	pool := resize(w.pool, len(p.parts))[:0] // at most every partition
	for pi, o := range p.owner {
		switch {
		case o < 0:
			pool = append(pool, int32(pi))
		case p.held[o] <= quota[o]:
			target[pi] = o
			kept[o]++
		default:
			// Ranked here, where p.parts is read in order.
			over[o] = append(over[o], slot{pos: ^score(p.parts[pi].h, p.members[o].key), m: int32(pi)})
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
		// (the pool's order does not matter below): a selection, not a sort
		// (sorting every over-quota member's partitions was a third of
		// the time of a plan of 110 members on 100,000 partitions).
		q := quota[o]
		if q > 0 {
			selectHashes(list, q, func(a, b slot) int {
				return strings.Compare(p.parts[a.m].id, p.parts[b.m].id)
			})
			for _, r := range list[:q] {
				target[r.m] = int32(o)
			}
		}
		kept[o] = q
		for _, r := range list[q:] {
			pool = append(pool, r.m)
		}
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
		pool = w.placeOnIdeal(p, pool, w.idealOf(p, quota), quota, kept, target)
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

// sameString is a == b, without a call where both are one string (the
// same bytes: strings never change), as a caller's partition ids mostly
// are from one call to the next (herd passes the same strings to every
// plan's call).
func sameString(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	return unsafe.StringData(a) == unsafe.StringData(b) || a == b
}
