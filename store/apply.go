package store

// Applying a claim, release or restore to a copy's records (ApplyAllFunc).

import (
	"fmt"
	"slices"
	"strings"

	"github.com/herdhq/herd/internal/idindex"
)

// sessionCache is the session of the last claim ApplyAllFunc applied,
// found in s.Sessions at at (-1: not there), while known: the claims of
// one batch come together, and a binary search among the sessions per
// claim was a tenth of what applying a join's entries cost.
type sessionCache struct {
	id    string
	at    int
	known bool
}

// find returns the index of session id in s.Sessions (-1: none).
func (sc *sessionCache) find(s *Snapshot, id string) int {
	if !sc.known || sc.id != id {
		sc.id, sc.at, sc.known = id, -1, true
		if i, ok := slices.BinarySearchFunc(s.Sessions, id, func(si SessionInfo, id string) int { return strings.Compare(si.ID, id) }); ok {
			sc.at = i
		}
	}
	return sc.at
}

// applyRecord applies the claim, release or restore c to the record cur
// (nil: s has none; a new one goes to *added, merged into Owners by
// mergeAdded). c is read through a pointer, as ApplyAllFunc walks cs
// (see there).
func (s *Snapshot) applyRecord(c *Change, cur *Ownership, added *map[string]*Ownership, sc *sessionCache) error {
	switch c.Kind {
	case Claimed:
		if cur != nil && c.Epoch <= cur.Epoch {
			return fmt.Errorf("apply: entry %d claims %q at epoch %d, not above %d", c.Version.Seq, c.Partition, c.Epoch, cur.Epoch)
		}
		session, member := c.Session, c.Member
		if i := sc.find(s, c.Session); i >= 0 {
			// The strings s already holds: readers compare them with
			// others from s, which is quicker when they are the same.
			session = s.Sessions[i].ID
			if s.Sessions[i].Member == c.Member {
				member = s.Sessions[i].Member
			}
		}
		if cur != nil {
			// In place, field by field: the record keeps its
			// Partition string, and is not copied whole (96 bytes).
			cur.GivenBack = keptMark(cur.GivenBack, c.Session)
			cur.Session, cur.Member, cur.Epoch, cur.Checkpoint = session, member, c.Epoch, nil
			return nil
		}
		if *added == nil {
			*added = map[string]*Ownership{}
		}
		// A record of its own for each: taking the address of one
		// variable reused had every claim applied allocate its record,
		// 100,000 allocations and 9.6 MB per 100,000 claims
		// (BenchmarkApplyClaims).
		(*added)[c.Partition] = &Ownership{Partition: c.Partition, Session: session, Member: member, Epoch: c.Epoch}
	case Released:
		if cur == nil || cur.Epoch != c.Epoch || cur.Session != c.Session {
			return fmt.Errorf("apply: entry %d releases %q at epoch %d by session %q, which does not hold it", c.Version.Seq, c.Partition, c.Epoch, c.Session)
		}
		cur.Session, cur.Member = "", ""
		if c.GivenBack != "" {
			cur.GivenBack = c.GivenBack
		}
	case Restored:
		if cur != nil {
			// Restore writes over a released record with a lower epoch only.
			if cur.Session != "" || cur.Epoch >= c.Epoch {
				return fmt.Errorf("apply: entry %d restores %q at epoch %d over a record it may not replace (session %q, epoch %d)", c.Version.Seq, c.Partition, c.Epoch, cur.Session, cur.Epoch)
			}
			cur.Epoch, cur.GivenBack = c.Epoch, ""
			return nil
		}
		if *added == nil {
			*added = map[string]*Ownership{}
		}
		(*added)[c.Partition] = &Ownership{Partition: c.Partition, Epoch: c.Epoch}
	}
	return nil
}

// mergeAdded merges the records new to s into Owners, in partition order,
// and drops the index.
func (s *Snapshot) mergeAdded(added map[string]*Ownership) {
	if len(added) == 0 {
		return
	}
	ps := make([]Ownership, 0, len(added))
	for _, o := range added {
		ps = append(ps, *o)
	}
	slices.SortFunc(ps, func(a, b Ownership) int { return strings.Compare(a.Partition, b.Partition) })
	merged := make([]Ownership, 0, len(s.Owners)+len(ps))
	i, j := 0, 0
	for i < len(s.Owners) || j < len(ps) {
		if j == len(ps) || i < len(s.Owners) && s.Owners[i].Partition < ps[j].Partition {
			merged = append(merged, s.Owners[i])
			i++
		} else {
			merged = append(merged, ps[j])
			j++
		}
	}
	s.Owners, s.index = merged, idindex.Index{}
}
