package balance

// The quotas: how many partitions each member is to hold, and what a target costs in moves.

import (
	"cmp"
	"math/big"
	"math/bits"
	"slices"
	"strings"
)

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
	for i, o := range p.owner {
		if o >= 0 && target[p.parts[i].id] != p.members[o].id {
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
	id string
	h  uint64 // hash of id (ring position)
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
	owner   []int32  // per part: index into members of its valid owner, or -1
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
	p.owner = make([]int32, 0, len(in.Partitions))
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
		p.parts = append(p.parts, part{id: pt.ID, h: hashString(pt.ID)})
		p.owner = append(p.owner, owner)
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
