package balance

import (
	"cmp"
	"math/big"
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
	n := len(p.members)
	if n == 0 {
		return map[string]string{}
	}
	quota := computeQuotas(p.members, p.held, len(p.parts))
	out := make(map[string]string, len(p.parts))

	// Sticky pass: members at or under quota keep everything they hold;
	// partitions of over-quota members are collected for ranking.
	kept := make([]int, n)
	over := make([][]int32, n)
	var pool []int32
	for pi := range p.parts {
		pt := &p.parts[pi]
		o := pt.owner
		switch {
		case o < 0:
			pool = append(pool, int32(pi))
		case p.held[o] <= quota[o]:
			out[pt.id] = p.members[o].id
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
		key := p.members[o].key
		slices.SortFunc(list, func(a, b int32) int {
			pa, pb := &p.parts[a], &p.parts[b]
			if c := cmp.Compare(score(pb.h, key), score(pa.h, key)); c != 0 {
				return c // higher score first
			}
			return strings.Compare(pa.id, pb.id)
		})
		q := quota[o]
		for _, pi := range list[:q] {
			out[p.parts[pi].id] = p.members[o].id
		}
		kept[o] = q
		pool = append(pool, list[q:]...)
	}

	if len(pool) == 0 {
		return out
	}

	// One slot per missing unit of each under-quota member, placed on a hash
	// ring. len(slots) == len(pool) because the quotas sum to len(p.parts).
	type slot struct {
		pos uint64
		m   int32
		k   int32
	}
	slots := make([]slot, 0, len(pool))
	for m := range p.members {
		for k := kept[m]; k < quota[m]; k++ {
			slots = append(slots, slot{pos: slotPos(p.members[m].h, k), m: int32(m), k: int32(k)})
		}
	}
	slices.SortFunc(slots, func(a, b slot) int {
		if c := cmp.Compare(a.pos, b.pos); c != 0 {
			return c
		}
		if c := cmp.Compare(a.m, b.m); c != 0 {
			return c
		}
		return cmp.Compare(a.k, b.k)
	})
	slices.SortFunc(pool, func(a, b int32) int {
		pa, pb := &p.parts[a], &p.parts[b]
		if c := cmp.Compare(pa.h, pb.h); c != 0 {
			return c
		}
		return strings.Compare(pa.id, pb.id)
	})

	// Walk the pool in ring order; each partition takes the first free slot
	// at or after its ring position, wrapping around. next is a union-find
	// "next free slot" array with sentinel S meaning "none up to the end".
	S := len(slots)
	next := make([]int32, S+1)
	for i := range next {
		next[i] = int32(i)
	}
	find := func(i int32) int32 {
		for next[i] != i {
			next[i] = next[next[i]] // path halving
			i = next[i]
		}
		return i
	}
	j := 0
	for _, pi := range pool {
		pt := &p.parts[pi]
		for j < S && slots[j].pos < pt.h {
			j++
		}
		s := find(int32(j))
		if int(s) == S {
			s = find(0)
		}
		if int(s) == S {
			// Unreachable: there are exactly as many slots as pool
			// partitions. Kept so odd input can never cause a panic.
			break
		}
		out[pt.id] = p.members[slots[s].m].id
		next[s] = s + 1
	}
	return out
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
		w := m.Weight
		if w <= 0 {
			w = 1
		}
		h := hashString(m.ID)
		p.members = append(p.members, member{id: m.ID, weight: w, h: h, key: mix64(h ^ keySalt)})
	}
	slices.SortFunc(p.members, func(a, b member) int { return strings.Compare(a.id, b.id) })
	idx := make(map[string]int32, len(p.members))
	for i, m := range p.members {
		idx[m.id] = int32(i)
	}
	p.held = make([]int, len(p.members))

	seenP := make(map[string]struct{}, len(in.Partitions))
	p.parts = make([]part, 0, len(in.Partitions))
	for _, pt := range in.Partitions {
		if _, dup := seenP[pt.ID]; dup {
			continue
		}
		seenP[pt.ID] = struct{}{}
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
