package redisstore

import (
	"slices"
	"strconv"
	"strings"

	"github.com/herdhq/herd/store"
)

// The partition set is kept twice: as a hash (partition -> weight), which
// versions before partlist read, and as one string, partlist, which a
// Snapshot reads: the set sorted by id, "<id>\x1f<weight>\x1e" per
// partition (ids contain no control characters). A hash of 100,000
// partitions cost the server 0.29-0.39 µs a field to read, 29-39 ms a
// Snapshot, and the client a map and a sort; a string costs the server a
// copy, and the client one split (the ids are substrings of it). A fleet
// of 1,000 members starting together read 35 s of one Redis core's time
// in partition sets (the simulation, docs/simulation.md).

const (
	listFieldSep  = "\x1f"
	listRecordSep = "\x1e"
)

// encodePartList encodes ps as partlist holds them (sorted by id).
func encodePartList(ps []store.Partition) string {
	sorted := slices.Clone(ps)
	slices.SortFunc(sorted, func(a, b store.Partition) int { return strings.Compare(a.ID, b.ID) })
	n := 0
	for _, p := range sorted {
		n += len(p.ID) + 4
	}
	var b strings.Builder
	b.Grow(n)
	for _, p := range sorted {
		b.WriteString(p.ID)
		b.WriteString(listFieldSep)
		b.WriteString(strconv.Itoa(p.Weight))
		b.WriteString(listRecordSep)
	}
	return b.String()
}

// decodePartList decodes partlist; ok is false if v is not what
// encodePartList writes (valid ids, sorted and unique, non-negative
// weights in canonical decimal): the caller reads the hash instead.
// A set of 100,000 partitions took 159 ns of CPU a partition when the ids
// were checked rune by rune and the weights formatted again to compare,
// 110 since (BenchmarkFleetDecodePartList, medians of three alternated
// runs on a loaded 2-core machine).
func decodePartList(v string) (ps []store.Partition, ok bool) {
	ps = make([]store.Partition, 0, strings.Count(v, listRecordSep))
	for v != "" {
		rec, rest, found := strings.Cut(v, listRecordSep)
		if !found {
			return nil, false
		}
		v = rest
		id, w, found := strings.Cut(rec, listFieldSep)
		if !found || !allDigits(w) || store.ValidateID("partition", id) != nil {
			return nil, false
		}
		// Canonical decimals only ("05" is not what encodePartList
		// writes: the hash is read instead).
		weight, err := strconv.Atoi(w)
		if err != nil || len(w) > 1 && w[0] == '0' || len(ps) > 0 && ps[len(ps)-1].ID >= id {
			return nil, false
		}
		ps = append(ps, store.Partition{ID: id, Weight: weight})
	}
	return ps, true
}
