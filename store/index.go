package store

import "github.com/herdhq/herd/internal/idindex"

// The index of a large snapshot's records by partition (see locate).

// buildIndex returns an index of owners by partition (see idindex): the
// map[string]int32 it replaces was 3.7 MB of pointers per member on 100,000
// records (400 MB for 110 members), and building one was a
// sixth of what applying a join's entries cost.
func buildIndex(owners []Ownership) idindex.Index {
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
// then the index's slots (passing over those of other ids by their tags),
// then the records' ids, then their bytes (and probes on, for an id whose
// tag another shares). Each step's loads do not depend on one another, so
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
	if s.index.Len() == 0 {
		for j := range n {
			out[j] = -1
		}
		return n
	}
	var h, at [lookAhead]uint64
	for j := range n {
		h[j] = idindex.Hash(cs[j].Partition)
	}
	for j := range n {
		v, slot := s.index.Next(h[j], s.index.Home(h[j]))
		out[j], at[j] = int32(v), slot
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
			// Another id of the same tag: probe on.
			out[j] = -1
			if v, ok := probe(s.index, s.Owners, cs[j].Partition, h[j], s.index.After(at[j])); ok {
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
func lookupIndex(index idindex.Index, owners []Ownership, id string) (int, bool) {
	if index.Len() == 0 {
		return 0, false
	}
	h := idindex.Hash(id)
	return probe(index, owners, id, h, index.Home(h))
}

// probe is lookupIndex of id, of hash h, from slot s of index on.
func probe(index idindex.Index, owners []Ownership, id string, h, s uint64) (int, bool) {
	for v, at := index.Next(h, s); v >= 0; v, at = index.Next(h, index.After(at)) {
		if v < len(owners) && owners[v].Partition == id {
			return v, true
		}
	}
	return 0, false
}
