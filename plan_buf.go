package herd

// plan's working memory (reconcileBuf) and the joins it makes: the
// partition set with the ownership records, each sorted by id.

import (
	"slices"
	"strings"
	"unsafe"

	"github.com/herdhq/herd/balance"
	"github.com/herdhq/herd/store"
)

// reconcileBuf is plan's working memory, O(P) (about 10 MB on 100,000),
// kept from one full plan to the next.
type reconcileBuf struct {
	sessIdx  map[string]int32 // live session id -> index in members
	members  []balance.Member // live sessions, sorted by id
	parts    []balance.Partition
	owner    []int32           // per partition: index in members of its live owner, or -1
	rec      []int32           // per partition: index of its record in the snapshot, or -1
	recPart  []int32           // per record of the snapshot (placeholders too): index of its partition, or -1
	target   []int32           // per partition: index in members of its target owner
	load     []float64         // per partition: its published load (loadmeter.Align)
	byLoad   []int32           // per partition: AssignLoad's target (swapped with target when taken)
	byCount  bool              // the published loads were all equal: target is the count balance
	strays   []int32           // records of ours for partitions outside the set
	records  int               // records found (placeholders aside)
	marked   int               // records of partitions in the set with a GivenBack mark
	avoid    []int32           // per partition: index in members of the live session that gave it back, or -1 (avoidGivers)
	from     []store.Partition // the partition set parts was made from
	checked  []store.Partition // the last partition set found sorted (see sorted)
	assigner balance.Assigner
}

// sorted returns the snapshot's sessions and partitions, each sorted by id
// without duplicates as the store contract promises (join checks the
// records): a sorted copy if broken, keeping the first of duplicates as
// balance.Assign does. The set last checked (b.checked, a read-only slice
// shared between snapshots) is not checked again.
func (b *reconcileBuf) sorted(snap *store.Snapshot) ([]store.SessionInfo, []store.Partition) {
	ss, ps := sortedByID(snap.Sessions, sessionID), snap.Partitions
	if !sameSlice(ps, b.checked) {
		b.checked = nil
		ps = sortedByID(ps, partitionID)
		if sameSlice(ps, snap.Partitions) {
			b.checked = ps
		}
	}
	return ss, ps
}

// sortedOwners returns a copy of rs sorted by partition, keeping the last
// of duplicate records (as a map would).
func sortedOwners(rs []store.Ownership) []store.Ownership {
	rs = slices.Clone(rs)
	slices.Reverse(rs)
	slices.SortStableFunc(rs, func(a, b store.Ownership) int { return strings.Compare(a.Partition, b.Partition) })
	return slices.CompactFunc(rs, func(a, b store.Ownership) bool { return a.Partition == b.Partition })
}

// sameSlice reports whether a and b are the same non-empty slice (same
// array, same length).
func sameSlice[T any](a, b []T) bool {
	return len(a) > 0 && len(a) == len(b) && &a[0] == &b[0]
}

// join joins the partition set with the records, both sorted by partition,
// into b.parts, b.rec, b.owner (the owner found at the same index last time
// tried first: usually right) and b.strays (our records outside the set).
// It reports false, the result to be discarded, if the records are not
// sorted (checked at no cost where a record matches its partition).
func (b *reconcileBuf) join(sessions []store.SessionInfo, parts []store.Partition, owners []store.Ownership, mine string) bool {
	P := len(parts)
	if !sameSlice(parts, b.from) {
		b.from = nil
		b.parts = resize(b.parts, P)
		for i, pt := range parts {
			b.parts[i] = balance.Partition{ID: pt.ID, Weight: pt.Weight}
		}
		b.from = parts
	}
	prev := b.owner
	b.owner, b.rec = resize(b.owner, P), resize(b.rec, P)
	b.recPart = resize(b.recPart, len(owners))
	b.strays = b.strays[:0]
	b.records, b.marked = 0, 0
	// stray consumes owners[j], which matches no partition.
	stray := func(j int) bool {
		if j > 0 && owners[j].Partition <= owners[j-1].Partition {
			return false
		}
		b.recPart[j] = -1
		if owners[j].Epoch > 0 {
			b.records++
		}
		if owners[j].Session == mine {
			b.strays = append(b.strays, int32(j))
		}
		return true
	}
	j := 0
	for i, pt := range parts {
		guess := int32(-1)
		if i < len(prev) {
			guess = prev[i] // read before b.owner[i] (the same array) is written
		}
		owner, rec := int32(-1), int32(-1)
		// One comparison where the record matches (no order test there);
		// the records before it are strays.
		found := j < len(owners) && sameString(owners[j].Partition, pt.ID)
		if !found && j < len(owners) {
			for j < len(owners) && owners[j].Partition < pt.ID {
				if !stray(j) {
					return false
				}
				j++
			}
			found = j < len(owners) && owners[j].Partition == pt.ID
		}
		if found {
			r := &owners[j]
			b.recPart[j] = int32(i)
			if r.Epoch != 0 { // else a placeholder of the member's copy (withPlaceholders): no record
				b.records++
				rec = int32(j)
				if r.GivenBack != "" {
					b.marked++
				}
				if s := r.Session; s != "" {
					if guess >= 0 && int(guess) < len(sessions) && sameString(sessions[guess].ID, s) {
						owner = guess
					} else if k, ok := b.sessIdx[s]; ok {
						owner = k
					}
				}
			}
			j++
		}
		b.owner[i], b.rec[i] = owner, rec
	}
	for ; j < len(owners); j++ {
		if !stray(j) {
			return false
		}
	}
	return true
}

// resize returns s with length n, reallocated only if its capacity is short.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n, n+n/8)
	}
	return s[:n]
}

// partIndex returns the index of partition p in parts (sorted by ID) and
// whether it is there, trying *at first (where it was last found) and
// storing it there: a search per partition cost more than the rest of
// plan's loops.
func partIndex(parts []store.Partition, p string, at *int32) (int, bool) {
	if i := int(*at); i < len(parts) && parts[i].ID == p {
		return i, true
	}
	i, ok := searchPartition(parts, p)
	if ok {
		*at = int32(i)
	}
	return i, ok
}

// searchPartition returns the index of partition p in parts (sorted by ID)
// and whether it is there.
func searchPartition(parts []store.Partition, p string) (int, bool) {
	return slices.BinarySearchFunc(parts, p, func(x store.Partition, id string) int { return strings.Compare(x.ID, id) })
}

// searchRecord returns the index of partition p's record in rs (sorted by
// partition) and whether it is there.
func searchRecord(rs []store.Ownership, p string) (int, bool) {
	return slices.BinarySearchFunc(rs, p, func(o store.Ownership, id string) int { return strings.Compare(o.Partition, id) })
}

// sameString is a == b, without a call where both are one string (the
// same bytes: strings never change), as plan's mostly are: a record's
// partition is the set's string and its session the live session's
// (withPlaceholders). The call of the runtime's comparison, with the loop's
// registers saved around it, was a sixth of a full plan of a balanced
// group of 100 members on 100,000 partitions (BenchmarkFullPlan/balanced,
// with AssignSorted's).
func sameString(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	return unsafe.StringData(a) == unsafe.StringData(b) || a == b
}
