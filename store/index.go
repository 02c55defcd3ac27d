package store

import "github.com/herdhq/herd/internal/idindex"

// The index of a large snapshot's records by partition (see locate).

// buildIndex returns an index of owners by partition (see idindex): the
// map[string]int32 it replaces was 3.7 MB of pointers per member on 100,000
// records (400 MB for 110 members), and building one was a
// sixth of what applying a join's entries cost.
func buildIndex(owners []Ownership) []int32 {
	return idindex.Build(len(owners), func(i int) string { return owners[i].Partition })
}

// lookAhead is how many entries' records prelocate looks up together.
const lookAhead = 32

// prelocate looks up, by the index, the records of the leading entries of
// cs about records (Claimed, Released, Restored; at most len(out), and at
// most lookAhead), and returns how many it looked at: out[j] is the
// position in s.Owners of the record of cs[j]'s partition, or -1 if the
// index did not find it (then locate will tell). It finds what
// lookupIndex would, in steps over all the entries at once: the hashes,
// then the index's slots, then the records' ids, then their bytes (and
// probes on, for an id not at the first slot tried). Each step's loads do not depend on one another, so
// the processor has them all under way together; one entry after another,
// each waited for the last. Looked up one at a time, locating records was
// about half a microsecond an entry on 100,000 records, most of it waiting
// for memory: in per-phase CPU profiles of 110 members on 100,000
// partitions in one process (taken with code not kept), 1.05 s of a
// join's 3.47 s and 4.8 s of a slow placement's 19.8 s.
func (s *Snapshot) prelocate(cs []Change, out []int32) int {
	n := 0
	for n < len(cs) && n < len(out) && n < lookAhead {
		if k := cs[n].Kind; k != Claimed && k != Released && k != Restored {
			break
		}
		n++
	}
	if len(s.index) == 0 {
		for j := range n {
			out[j] = -1
		}
		return n
	}
	mask := uint64(len(s.index) - 1)
	var h [lookAhead]uint64
	for j := range n {
		h[j] = idindex.Hash(cs[j].Partition) & mask
	}
	for j := range n {
		out[j] = s.index[h[j]] - 1
	}
	var ids [lookAhead]string
	for j := range n {
		if v := out[j]; v >= 0 && int(v) < len(s.Owners) {
			ids[j] = s.Owners[v].Partition
		} else {
			out[j] = -1
		}
	}
	for j := range n {
		if out[j] >= 0 && ids[j] != cs[j].Partition {
			// Not at the first place tried: probe on (locate would
			// hash the id again and start over).
			out[j] = -1
			if v, ok := probe(s.index, s.Owners, cs[j].Partition, (h[j]+1)&mask); ok {
				out[j] = int32(v)
			}
		}
	}
	return n
}

// lookupIndex returns the position in owners of the record of partition
// id that index (from buildIndex, on owners or on a list owners was
// changed from) names, and whether it names one: a position is used only
// if the record there is id's, so an index that no longer matches owners
// misses, and is never wrong.
func lookupIndex(index []int32, owners []Ownership, id string) (int, bool) {
	if len(index) == 0 {
		return 0, false
	}
	return probe(index, owners, id, idindex.Hash(id)&uint64(len(index)-1))
}

// probe is lookupIndex from slot h of index on.
func probe(index []int32, owners []Ownership, id string, h uint64) (int, bool) {
	mask := uint64(len(index) - 1)
	for ; ; h = (h + 1) & mask {
		v := int(index[h]) - 1
		if v < 0 {
			return 0, false
		}
		if v < len(owners) && owners[v].Partition == id {
			return v, true
		}
	}
}
