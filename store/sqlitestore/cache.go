package sqlitestore

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herdhq/herd/store"
)

// A snapshot reads the group's sessions every time (their time left
// changes with every renewal, which logs nothing), but its partition set
// and records change only with logged changes. So a Store keeps the last
// ones it read of each group, at their version, and a later snapshot reads
// the log entries since and applies them (store.Snapshot.ApplyAll, the
// replica rule the conformance suite checks against full reads) instead of
// reading every row again. Reading the 20,000 rows of a group of 10,000
// partitions took about 25 ms of CPU; members re-read their group on every
// change while partitions move, and 16 members of one bench process spent
// half their CPU on it.
//
// Rows changed without the log (by hand, with the sqlite3 shell) are not
// in it: the records are read in full again refreshAfter after the last
// full read, so such a change shows within that time, and a Claim or
// Release of such a record sees it at once (they read the row).

// refreshAfter is how long a cached set of records is used before the
// next snapshot reads them in full.
const refreshAfter = 10 * time.Second

// maxCachedGroups bounds the groups a Store keeps records of.
const maxCachedGroups = 64

// recordSet is a group's partition set and records at a version: read-only
// once made, shared by the snapshots that return it.
type recordSet struct {
	gid        int64
	version    store.Version
	partset    bool
	partitions []store.Partition
	owners     []store.Ownership
	malformed  []store.Malformed // partition and ownership rows only
	readAt     time.Time         // the last full read
}

type recordCache struct {
	mu      sync.Mutex
	groups  map[string]*recordSet
	applied atomic.Int64 // snapshots made by applying the log (tests)
}

// reset forgets every group: the Store left its file for another (file.go).
func (rc *recordCache) reset() {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	clear(rc.groups)
}

func (rc *recordCache) get(name string) *recordSet {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.groups[name]
}

func (rc *recordCache) put(name string, rs *recordSet) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.groups == nil {
		rc.groups = map[string]*recordSet{}
	}
	if cur := rc.groups[name]; cur != nil && cur.gid == rs.gid && cur.version.Seq > rs.version.Seq {
		return // a newer one came meanwhile
	}
	if _, ok := rc.groups[name]; !ok && len(rc.groups) >= maxCachedGroups {
		for k := range rc.groups { // any one
			delete(rc.groups, k)
			break
		}
	}
	rc.groups[name] = rs
}

// records returns the group's records at g's version, from the cache
// (with the log entries since applied) when it can, else read in full.
func (s *Store) records(c conn, name string, g *group) (*recordSet, error) {
	var want store.Version
	if g.seq > 0 {
		want = store.Version{Seq: g.seq, Tag: g.tag}
	}
	cur := s.cache.get(name)
	if cur != nil && cur.gid == g.id && time.Since(cur.readAt) < refreshAfter && cur.version.Seq <= g.seq {
		if cur.version == want && cur.partset == g.partset {
			return cur, nil
		}
		n := g.seq - cur.version.Seq
		if cur.version.Seq > 0 && n <= uint64(2*(len(cur.owners)+len(cur.partitions))+1000) {
			cs, v, err := readLog(c, name, cur.version, int(n))
			var be *bailout
			switch {
			case errors.As(err, &be):
				// Trimmed, or another history: read in full.
			case err != nil:
				return nil, err
			case v == want:
				if next, ok := cur.apply(cs); ok && next.partset == g.partset {
					s.cache.applied.Add(1)
					s.cache.put(name, next)
					return next, nil
				}
			}
		}
	}
	rs, err := readRecords(c, g)
	if err != nil {
		return nil, err
	}
	s.cache.put(name, rs)
	return rs, nil
}

// apply returns the records after the entries cs (which follow r's
// version), false if they do not fit (then the caller reads in full).
func (r *recordSet) apply(cs []store.Change) (*recordSet, bool) {
	if len(cs) == 0 {
		return r, true
	}
	// ApplyAll keeps the sessions too: give it the ones the entries end
	// without opening them first, as they were at r's version.
	opened := map[string]bool{}
	var live []store.SessionInfo
	for _, c := range cs {
		switch c.Kind {
		case store.SessionOpened:
			opened[c.Session] = true
		case store.SessionClosed, store.SessionExpired:
			if !opened[c.Session] {
				live = append(live, store.SessionInfo{ID: c.Session})
			}
		}
	}
	slices.SortFunc(live, func(a, b store.SessionInfo) int { return strings.Compare(a.ID, b.ID) })
	live = slices.CompactFunc(live, func(a, b store.SessionInfo) bool { return a.ID == b.ID })
	snap := &store.Snapshot{Sessions: live, Partitions: r.partitions, Owners: slices.Clone(r.owners),
		PartitionSetStored: r.partset, Version: r.version}
	if err := snap.ApplyAll(cs); err != nil {
		return nil, false
	}
	next := &recordSet{gid: r.gid, version: snap.Version, partset: snap.PartitionSetStored,
		partitions: snap.Partitions, owners: snap.Owners, readAt: r.readAt}
	// Malformed rows the entries replaced are gone: a new partition set
	// replaces every partition row; a record claimed or restored was
	// written whole.
	touched := map[string]bool{}
	newSet := false
	for _, c := range cs {
		switch c.Kind {
		case store.PartitionsSet:
			newSet = true
		case store.Claimed, store.Restored:
			touched[c.Partition] = true
		}
	}
	for _, m := range r.malformed {
		if m.Kind == store.MalformedPartition && newSet || m.Kind == store.MalformedOwnership && touched[m.ID] {
			continue
		}
		next.malformed = append(next.malformed, m)
	}
	return next, true
}
