package balance

import (
	"slices"
	"sync"
)

// The ideals of a process, shared by its Assigners.
//
// An ideal (the target of every partition when none has an owner) depends
// on the partitions, the members and their quotas only, and costs O(P log P)
// to compute: 6 to 14 ms for 100,000 partitions. Every member of a group
// computes the same ones. An Assigner keeps its last few (work.ideals), but
// an Assigner does not live long where it sits in a sync.Pool that each
// garbage collection empties (the member's plan buffers do): the next plan
// computed the ideal again.
//
// An entry holds the partition ids it was computed for (its own copy: it
// is compared id by id before it is used, never trusted on a hash alone),
// their ring order, and the ideals of the last few memberships. Every slice
// in it is read-only once published.

// sharedSets is how many partition sets the process keeps ideals for, and
// sharedIdeals how many memberships per set.
const (
	sharedSets   = 2
	sharedIdeals = 8
)

type sharedSet struct {
	fp     uint64    // fingerprint of ids (see fingerprint)
	ids    []string  // the partitions, in the order the ideals index them
	ring   ringOrder // every partition in ring order (nil until computed)
	ideals []ideal   // most recent first
}

var shared struct {
	mu   sync.Mutex
	sets []*sharedSet // most recent first
	off  bool         // tests: compute every ideal (see computeAlone)
}

// fingerprint combines the partitions' hashes, in order, into one number:
// sets that differ almost always differ in it, so that a lookup compares
// ids only with a set that is very likely the same.
func fingerprint(parts []part) uint64 {
	fp := uint64(len(parts))
	for _, pt := range parts {
		fp = mix64(fp ^ pt.h)
	}
	return fp
}

// sameIDs reports whether set holds exactly the ids of parts, in order.
func (s *sharedSet) sameIDs(fp uint64, parts []part) bool {
	if s.fp != fp || len(s.ids) != len(parts) {
		return false
	}
	for i := range parts {
		if s.ids[i] != parts[i].id {
			return false
		}
	}
	return true
}

// sharedSetFor returns the process's entry for the partitions of p (whose
// fingerprint is fp), making one (and forgetting the least recent) if there
// is none. known, if not nil, is an entry found for these same partitions
// before (the Assigner's, kept while its partitions stay the same): taken
// without comparing every id again (5% of a plan on a new membership of
// 100 members on 100,000 partitions: BenchmarkFullPlan/first, in a CPU
// profile). shared.mu is held.
func sharedSetFor(p *problem, fp uint64, known *sharedSet) *sharedSet {
	for i, s := range shared.sets {
		if s == known || s.sameIDs(fp, p.parts) {
			copy(shared.sets[1:i+1], shared.sets[:i])
			shared.sets[0] = s
			return s
		}
	}
	s := &sharedSet{fp: fp, ids: make([]string, len(p.parts))}
	for i, pt := range p.parts {
		s.ids[i] = pt.id
	}
	if len(shared.sets) == sharedSets {
		shared.sets = shared.sets[:sharedSets-1]
	}
	shared.sets = slices.Insert(shared.sets, 0, s)
	return s
}

// sharedIdeal returns the ideal the process has for p's partitions (of
// fingerprint fp, entry known if found before: see sharedSetFor), members
// and quota, if any, the set's ring order if it has one, and the set, for
// publishIdeal (nil when shared ideals are off).
func sharedIdeal(p *problem, fp uint64, quota []int, known *sharedSet) (target []int32, ring ringOrder, s *sharedSet) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.off {
		return nil, ring, nil
	}
	s = sharedSetFor(p, fp, known)
	for i, c := range s.ideals {
		if slices.Equal(c.members, p.members) && slices.Equal(c.quota, quota) {
			copy(s.ideals[1:i+1], s.ideals[:i])
			s.ideals[0] = c
			return c.target, s.ring, s
		}
	}
	return nil, s.ring, s
}

// publishIdeal adds an ideal (and the ring order it was computed with) to
// the set sharedIdeal returned: neither may be changed afterwards. A set
// the process forgot meanwhile takes it to no one's harm.
func publishIdeal(s *sharedSet, c ideal, ring ringOrder) {
	if s == nil {
		return
	}
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if s.ring.all == nil {
		s.ring = ring
	}
	if len(s.ideals) == sharedIdeals {
		s.ideals = s.ideals[:sharedIdeals-1]
	}
	s.ideals = slices.Insert(s.ideals, 0, c)
}
