package balance

// The ideal's slot ring and matching against the reference (ideal_ref_test.go).

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestMatchMatchesReference: match places every partition where the
// reference's union-find walk does, on random rings with many equal
// positions (ties between partitions and slots), partitions that wrap
// around, and more or fewer partitions than slots.
func TestMatchMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	var w work
	for trial := range 5000 {
		S, P := rng.IntN(60), rng.IntN(60)
		if trial%2 == 0 {
			P = S // as in an ideal
		}
		span := uint64(1 + rng.IntN(100)) // positions in [0, span): many ties
		if trial%5 == 0 {
			span = 1 << 63
		}
		slots := make([]slot, S)
		for i := range slots {
			slots[i] = slot{pos: rng.Uint64N(span), m: int32(rng.IntN(8)), k: int32(i)}
		}
		slices.SortFunc(slots, compareSlot)
		ring := make([]slot, P) // pos: hash, m: partition index
		for i := range ring {
			ring[i] = slot{pos: rng.Uint64N(span), m: int32(i)}
		}
		slices.SortFunc(ring, compareSlot)
		want := make([]int32, P)
		refWalk(slots, ring, func(r slot) uint64 { return r.pos }, want)
		all, h := make([]int32, P), make([]uint64, P)
		for i, r := range ring {
			all[i], h[i] = r.m, r.pos
		}
		got := make([]int32, P)
		w.match(slots, all, h, got)
		if !slices.Equal(got, want) {
			t.Fatalf("trial %d (%d slots, %d partitions, span %d): match %v, reference %v", trial, S, P, span, got, want)
		}
	}
}

// TestSlotRingMatchesSort: the ring made from the last one, through a
// sequence of memberships (joins, leaves, weights and quotas changed, a
// membership with nobody in common), is every slot sorted anew.
func TestSlotRingMatchesSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 11))
	var r slotRing
	var buf []slot
	pool := make([]member, 40)
	for i := range pool {
		pool[i] = newMember(Member{ID: fmt.Sprintf("m%02d", i)})
	}
	for iter := range 400 {
		var ms []member
		lo, hi := 0, len(pool)
		if iter%50 == 49 { // nobody in common with the last
			lo, hi = len(pool)/2*(iter/50%2), len(pool)/2*(iter/50%2+1)
		}
		for _, m := range pool[lo:hi] {
			if rng.IntN(4) > 0 {
				ms = append(ms, m)
			}
		}
		quota := make([]int, len(ms))
		for i := range quota {
			quota[i] = rng.IntN(300)
		}
		var want []slot
		for m := range ms {
			for k := range quota[m] {
				want = append(want, slot{pos: slotPos(ms[m].h, k), m: int32(m), k: int32(k)})
			}
		}
		slices.SortFunc(want, compareSlot)
		if got := r.ringFor(ms, quota, &buf); !slices.Equal(got, want) {
			t.Fatalf("iteration %d: %d members: the ring differs from every slot sorted", iter, len(ms))
		}
	}
}

// TestSlotRingMergesTies: slots of equal positions, kept and new, merge in
// member then unit order, with the slots of members gone or of units past
// a lowered quota left out (positions from hashes rarely tie, so the
// ring's merge is given some that do).
func TestSlotRingMergesTies(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 13))
	for trial := range 1000 {
		var r slotRing
		n := 1 + rng.IntN(6)
		r.members = make([]member, n)
		r.quota = make([]int, n)
		r.remap = make([]int32, n)
		for m := range n {
			r.quota[m] = rng.IntN(20)
			r.remap[m] = int32(m) // nobody renumbered
			for k := range r.quota[m] {
				r.slots = append(r.slots, slot{pos: rng.Uint64N(10), m: int32(m), k: int32(k)})
			}
		}
		slices.SortFunc(r.slots, compareSlot)
		quota := slices.Clone(r.quota)
		var fresh []slot
		for m := range n {
			switch rng.IntN(4) {
			case 0: // gone
				r.remap[m], quota[m] = -1, 0
			case 1: // a lower quota
				quota[m] = rng.IntN(quota[m] + 1)
			default: // a higher one
				more := rng.IntN(10)
				for k := quota[m]; k < quota[m]+more; k++ {
					fresh = append(fresh, slot{pos: rng.Uint64N(10), m: int32(m), k: int32(k)})
				}
				quota[m] += more
			}
		}
		slices.SortFunc(fresh, compareSlot)
		want := slices.Clone(fresh)
		for _, s := range r.slots {
			if r.remap[s.m] >= 0 && int(s.k) < quota[s.m] {
				want = append(want, s)
			}
		}
		slices.SortFunc(want, compareSlot)
		if got := r.mergeKept(nil, fresh, quota); !slices.Equal(got, want) {
			t.Fatalf("trial %d: merged %v, want %v", trial, got, want)
		}
	}
}

// TestIdealMatchesReference: the ideals one Assigner computes through a
// sequence of memberships and partition sets (each made from the last
// one's slots) are the reference's, bit for bit.
func TestIdealMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(14, 15))
	var pool []Member
	for range 300 {
		pool = append(pool, Member{ID: fmt.Sprintf("s%016x", rng.Uint64()), Weight: 1})
	}
	slices.SortFunc(pool, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	var a Assigner
	var parts []Partition
	for iter := range 120 {
		if iter%20 == 0 { // a new partition set
			parts = parts[:0]
			for i := range 1 + rng.IntN(6000) {
				parts = append(parts, Partition{ID: fmt.Sprintf("p-%d-%d", iter, i)})
			}
			slices.SortFunc(parts, func(a, b Partition) int { return strings.Compare(a.ID, b.ID) })
		}
		var ms []Member
		keep := 0.5 + rng.Float64()/2
		for _, m := range pool[:1+rng.IntN(len(pool))] {
			if rng.Float64() < keep {
				if iter%3 == 0 {
					m.Weight = 1 + rng.IntN(3)
				}
				ms = append(ms, m)
			}
		}
		if len(ms) == 0 {
			continue
		}
		none := make([]int32, len(parts))
		for i := range none {
			none[i] = -1
		}
		got, err := a.AssignSorted(ms, parts, none, nil)
		if err != nil {
			t.Fatal(err)
		}
		p := &a.p
		want := refIdeal(p, computeQuotas(p.members, p.held, len(p.parts)))
		if !slices.Equal(got, want) {
			t.Fatalf("iteration %d (%d members, %d partitions): the ideal differs from the reference", iter, len(ms), len(parts))
		}
	}
}

// TestAssignMatchesReference: one Assigner (its ideals and slot rings
// carried from call to call) through the states a fleet passes, on random
// groups: a first placement, part of it claimed, members joining or
// crashing with the rest owned, owners at random, weights; every target is
// the reference's (refAssign), bit for bit.
func TestAssignMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 17))
	var pool []Member
	for range 120 {
		pool = append(pool, Member{ID: fmt.Sprintf("s%016x", rng.Uint64()), Weight: 1})
	}
	slices.SortFunc(pool, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	var a Assigner
	var parts []Partition
	var last []int32 // the last target, on the last members
	var lastMs []Member
	for iter := range 300 {
		if iter%30 == 0 {
			parts = parts[:0]
			n := 1 + rng.IntN(3000)
			if iter%60 == 0 {
				n = 20_000 // large enough for the radix sorts and the bitmap
			}
			for i := range n {
				parts = append(parts, Partition{ID: fmt.Sprintf("p-%d-%d", iter, i)})
			}
			slices.SortFunc(parts, func(a, b Partition) int { return strings.Compare(a.ID, b.ID) })
			last = nil
		}
		var ms []Member
		for _, m := range pool[:2+rng.IntN(len(pool)-2)] {
			if rng.IntN(10) > 0 {
				if iter%4 == 3 {
					m.Weight = 1 + rng.IntN(3)
				}
				ms = append(ms, m)
			}
		}
		owner := make([]int32, len(parts))
		state := rng.IntN(4)
		for i := range owner {
			owner[i] = -1
			switch {
			case state == 1 && last != nil: // the last target, partly carried out, on these members
				if rng.IntN(3) > 0 {
					owner[i] = indexOf(ms, lastMs[last[i]].ID)
				}
			case state == 2 && last != nil: // the last target carried out, on these members
				owner[i] = indexOf(ms, lastMs[last[i]].ID)
			case state == 3: // at random, some unowned
				if rng.IntN(4) > 0 {
					owner[i] = int32(rng.IntN(len(ms)))
				}
			}
		}
		got, err := a.AssignSorted(ms, parts, owner, nil)
		if err != nil {
			t.Fatal(err)
		}
		if want := refAssign(&a.p); !slices.Equal(got, want) {
			t.Fatalf("iteration %d (state %d, %d members, %d partitions): the target differs from the reference", iter, state, len(ms), len(parts))
		}
		last, lastMs = slices.Clone(got), ms
	}
}

// indexOf returns the index of id in ms, or -1.
func indexOf(ms []Member, id string) int32 {
	for i, m := range ms {
		if m.ID == id {
			return int32(i)
		}
	}
	return -1
}
