package herd

// A read of the group made ready for the replica (sortedCopy), and the
// check of own records that stands in for a read at rest (ownRecordsIntact).

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"

	"github.com/herdhq/herd/store"
)

// sortedCopy returns a copy of snap that Apply may change, its lists
// sorted by id without duplicates (of duplicate records the last kept, as
// plan does). The records are copied once, by withPlaceholders, and a
// sorted partition set not at all: Apply replaces it, never writes into it.
func sortedCopy(snap *store.Snapshot) *store.Snapshot {
	c := *snap
	c.Sessions = slices.Clone(sortedByID(c.Sessions, sessionID)) // Apply inserts into it
	c.Malformed = slices.Clone(c.Malformed)
	c.Partitions = sortedByID(c.Partitions, partitionID)
	live := liveSessions(c.Sessions)
	owners, sorted := withPlaceholders(c.Partitions, c.Owners, live)
	if !sorted {
		owners, _ = withPlaceholders(c.Partitions, sortedOwners(c.Owners), live)
	}
	c.Owners = owners // a new list
	return &c
}

// sortedByID returns xs if its ids increase strictly, or else a copy sorted
// by id without duplicates (the first of each kept).
func sortedByID[T any](xs []T, id func(T) string) []T {
	for i := 1; i < len(xs); i++ {
		if id(xs[i-1]) >= id(xs[i]) {
			xs = slices.Clone(xs)
			slices.SortStableFunc(xs, func(a, b T) int { return strings.Compare(id(a), id(b)) })
			return slices.CompactFunc(xs, func(a, b T) bool { return id(a) == id(b) })
		}
	}
	return xs
}

func sessionID(s store.SessionInfo) string { return s.ID }
func partitionID(p store.Partition) string { return p.ID }

// liveSessions indexes the sessions ss by id.
func liveSessions(ss []store.SessionInfo) map[string]*store.SessionInfo {
	byID := make(map[string]*store.SessionInfo, len(ss))
	for i := range ss {
		byID[ss[i].ID] = &ss[i]
	}
	return byID
}

// withPlaceholders returns the records rs (sorted by partition) with a
// placeholder (epoch 0, which no store writes; plan reads it as no record)
// for every partition of ps (sorted) that has none, so that a first
// placement's claims replace entries in place instead of inserting; and
// whether rs was sorted strictly (if not, the list is not to be used).
// Partition ids are ps's strings, and a live session's records (live, by
// id) share its strings, so plan compares pointers, not bytes (a tenth of a
// large plan's CPU). An entry is made by setting its non-zero fields, not
// by copying a record (six pointer words, each a write barrier while the
// collector runs, as it often does after the read that allocated rs).
func withPlaceholders(ps []store.Partition, rs []store.Ownership, live map[string]*store.SessionInfo) ([]store.Ownership, bool) {
	out := make([]store.Ownership, 0, len(ps)+len(rs)/8)
	// add appends a record as partition p's (p: its own id or a set's);
	// a record outside the set (p is its own) must follow the last entry.
	add := func(p string, r *store.Ownership, outside bool) bool {
		if outside && len(out) > 0 && p <= out[len(out)-1].Partition {
			return false // out of order, or a duplicate
		}
		if len(out) == cap(out) {
			out = slices.Grow(out, 1+len(ps)/8)
		}
		out = out[:len(out)+1]
		o := &out[len(out)-1]
		o.Partition, o.Epoch = p, r.Epoch
		if r.Session != "" {
			o.Session, o.Member = r.Session, r.Member
			if s, ok := live[r.Session]; ok {
				o.Session = s.ID
				if r.Member == s.Member {
					o.Member = s.Member
				}
			}
		}
		if r.Checkpoint != nil {
			o.Checkpoint = r.Checkpoint
		}
		if r.GivenBack != "" {
			o.GivenBack = r.GivenBack
		}
		return true
	}
	var none store.Ownership // a placeholder's fields
	j := 0
	for _, p := range ps {
		for ; j < len(rs) && rs[j].Partition < p.ID; j++ {
			if !add(rs[j].Partition, &rs[j], true) {
				return nil, false
			}
		}
		if j < len(rs) && rs[j].Partition == p.ID {
			add(p.ID, &rs[j], false) // one string for both: plan compares them
			j++
			continue
		}
		add(p.ID, &none, false)
	}
	for ; j < len(rs); j++ {
		if !add(rs[j].Partition, &rs[j], true) {
			return nil, false
		}
	}
	return out, true
}

// ownRecordsIntact reads the records of the next batch (MaxBatch) of the
// partitions this member runs after from, and reports whether each still
// names this session at its epoch (one edited by hand, which the log
// cannot show, calls for a read of the group), and where the next check
// goes on ("": the start). A failed read reports true. One batch a check:
// a member at rest costs one read per PollInterval whatever its share.
func (m *Member) ownRecordsIntact(sess *session, from string) (intact bool, next string) {
	m.running.mu.Lock()
	own := maps.Clone(m.running.owned)
	m.running.mu.Unlock()
	ids := slices.Sorted(maps.Keys(own))
	i, found := slices.BinarySearch(ids, from) // ids are never empty
	if found {
		i++
	}
	if i >= len(ids) {
		i = 0
	}
	batch := ids[i:min(len(ids), i+store.MaxBatch)]
	if len(batch) == 0 {
		return true, ""
	}
	if i+len(batch) < len(ids) {
		next = batch[len(batch)-1]
	}
	ctx, cancel := context.WithTimeout(sess.ctx, m.cfg.RenewTimeout)
	recs, err := m.st.Records(ctx, m.cfg.Group, batch)
	cancel()
	if err != nil {
		return !errors.Is(err, store.ErrCorrupt), from
	}
	if len(recs) != len(batch) {
		return false, next // missing or malformed
	}
	for _, r := range recs {
		if e, ok := own[r.Partition]; ok && (r.Session != sess.id || r.Epoch != e) {
			return false, next // edited, or another claim's entry on its way (one read more at worst)
		}
	}
	return true, next
}
