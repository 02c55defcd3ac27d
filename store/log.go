package store

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/herdhq/herd/internal/idindex"
)

// Version is a point in a group's log: the state after entry Seq. Seq
// increases by exactly one per entry. The zero Version is "no log yet": no
// entry was ever written.
//
// Tag tells histories apart: two versions with the same Seq and Tag name
// the same state of the group, and a different history of the group never
// gives the same Tag at the same Seq, so a version of an old history is never
// mistaken for a point of a new one even when the new sequence catches up.
// A new history begins when the group is deleted, when the store lost its
// data, or (for a store that can lose its latest writes, as Redis does in a
// failover to a replica that had not received them) when the log goes on
// from an earlier entry. Each backend derives Tag to that end: memstore
// keeps a random id per history; redisstore chains a hash over the entries
// (see its log.go). Callers only compare versions and pass them back.
type Version struct {
	Seq uint64
	Tag uint64
}

func (v Version) String() string { return fmt.Sprintf("%d/%x", v.Seq, v.Tag) }

// ChangeKind says what a log entry records.
type ChangeKind int

const (
	// SessionOpened: Session opened for Member with Weight.
	SessionOpened ChangeKind = iota + 1
	// SessionClosed: Session closed by its member (CloseSession).
	SessionClosed
	// SessionExpired: Session's TTL passed on the store's clock.
	SessionExpired
	// Claimed: Partition's record names Session (of Member) at Epoch. The
	// record keeps its GivenBack mark, unless the mark names Session.
	Claimed
	// Released: Partition's record was released by Session at Epoch; the
	// record keeps its epoch and names no session. GivenBack is set
	// (to Session) when the release was a GiveBack: the record's mark
	// becomes it; a plain release ("") keeps the record's mark.
	Released
	// Restored: Partition's record was put back released at Epoch (Restore):
	// created, or written over a released record with a lower epoch; it has
	// no GivenBack mark.
	Restored
	// PartitionsSet: the group's partition set is now Partitions (the
	// whole set, sorted by ID).
	PartitionsSet
	// Requested: a request (Store.Request) to the owner of key Partition,
	// or to member Member, to take Action (RequestRun, ...). It changes
	// nothing in the group: only its owner acts on it (see Request).
	Requested
	// LoadsReported: Session published the loads of partitions (Loads,
	// sorted by partition; see ReportLoads). It changes no record: the
	// snapshot's Loads take the new values.
	LoadsReported
)

func (k ChangeKind) String() string {
	switch k {
	case SessionOpened:
		return "session-opened"
	case SessionClosed:
		return "session-closed"
	case SessionExpired:
		return "session-expired"
	case Claimed:
		return "claimed"
	case Released:
		return "released"
	case Restored:
		return "restored"
	case PartitionsSet:
		return "partitions-set"
	case Requested:
		return "requested"
	case LoadsReported:
		return "loads-reported"
	}
	return fmt.Sprintf("change(%d)", int(k))
}

// Change is one entry of a group's log. Which fields are set depends on
// Kind (see ChangeKind); the others are zero.
type Change struct {
	Version    Version // the group's version after this entry
	Kind       ChangeKind
	Session    string
	Member     string
	Weight     int
	Partition  string
	Epoch      uint64
	Partitions []Partition // PartitionsSet only; read-only
	GivenBack  string      // Released by GiveBack only: the giving session
	Action     string      // Requested only: RequestRun, RequestPause, RequestResume or RequestLeave
	Loads      []Load      // LoadsReported only: sorted by partition; read-only
	// At is when the entry was appended, on the store's clock (etcdstore:
	// the writing process's clock; see each backend's doc), to the
	// microsecond or better; entries one write appends together share it.
	// Zero: unknown, an entry written by a herd older than this field.
	// Apply ignores it: two replicas agree whatever it says.
	At time.Time
}

// Clone returns a copy of s whose slices are its own, so that Apply may
// change it: snapshots returned by a store are read-only and may share
// their slices.
func (s *Snapshot) Clone() *Snapshot {
	c := *s
	c.Sessions = slices.Clone(s.Sessions)
	c.Partitions = slices.Clone(s.Partitions)
	c.Owners = slices.Clone(s.Owners)
	c.Malformed = slices.Clone(s.Malformed)
	c.Loads = slices.Clone(s.Loads)
	return &c
}

// Apply changes s as the entry c says: the replica rule every member and the
// conformance suite share. s must be the caller's own (see Clone), and c
// must be the entry after s.Version (c.Version.Seq == s.Version.Seq+1, as
// Changes delivers it); then Apply sets s.Version to c.Version. The log does not track sessions' Remaining: a
// session Apply adds has Remaining 0, and the others keep theirs.
//
// An entry that does not fit s (out of sequence, a session opened twice, a
// release of a record that does not exist) is an error and leaves s
// unchanged: the replica has diverged from the store and must be rebuilt
// from a new Snapshot.
//
// Cost: a new session or record is inserted into a sorted slice, O(n).
func (s *Snapshot) Apply(c Change) error {
	if c.Version.Seq != s.Version.Seq+1 {
		return fmt.Errorf("apply: entry %v does not follow version %v", c.Version, s.Version)
	}
	bySession := func(si SessionInfo, id string) int { return strings.Compare(si.ID, id) }
	byPartition := func(o Ownership, id string) int { return strings.Compare(o.Partition, id) }
	switch c.Kind {
	case SessionOpened:
		i, found := slices.BinarySearchFunc(s.Sessions, c.Session, bySession)
		if found {
			return fmt.Errorf("apply: entry %d opens session %q, which is open", c.Version.Seq, c.Session)
		}
		s.Sessions = slices.Insert(s.Sessions, i, SessionInfo{ID: c.Session, Member: c.Member, Weight: c.Weight})
	case SessionClosed, SessionExpired:
		i, found := slices.BinarySearchFunc(s.Sessions, c.Session, bySession)
		if !found {
			return fmt.Errorf("apply: entry %d ends session %q, which is not open", c.Version.Seq, c.Session)
		}
		s.Sessions = slices.Delete(s.Sessions, i, i+1)
	case Claimed:
		o := Ownership{Partition: c.Partition, Session: c.Session, Member: c.Member, Epoch: c.Epoch}
		i, found := slices.BinarySearchFunc(s.Owners, c.Partition, byPartition)
		if found {
			if c.Epoch <= s.Owners[i].Epoch {
				return fmt.Errorf("apply: entry %d claims %q at epoch %d, not above %d", c.Version.Seq, c.Partition, c.Epoch, s.Owners[i].Epoch)
			}
			o.GivenBack = keptMark(s.Owners[i].GivenBack, c.Session)
			s.Owners[i] = o
		} else {
			s.Owners, s.index = slices.Insert(s.Owners, i, o), idindex.Index{}
		}
	case Released:
		i, found := slices.BinarySearchFunc(s.Owners, c.Partition, byPartition)
		if !found || s.Owners[i].Epoch != c.Epoch || s.Owners[i].Session != c.Session {
			return fmt.Errorf("apply: entry %d releases %q at epoch %d by session %q, which does not hold it", c.Version.Seq, c.Partition, c.Epoch, c.Session)
		}
		s.Owners[i].Session, s.Owners[i].Member = "", ""
		if c.GivenBack != "" {
			s.Owners[i].GivenBack = c.GivenBack
		}
	case Restored:
		i, found := slices.BinarySearchFunc(s.Owners, c.Partition, byPartition)
		if found {
			// Restore writes over a released record with a lower epoch only.
			if cur := &s.Owners[i]; cur.Session != "" || cur.Epoch >= c.Epoch {
				return fmt.Errorf("apply: entry %d restores %q at epoch %d over a record it may not replace (session %q, epoch %d)", c.Version.Seq, c.Partition, c.Epoch, cur.Session, cur.Epoch)
			}
			s.Owners[i] = Ownership{Partition: c.Partition, Epoch: c.Epoch}
			break
		}
		s.Owners, s.index = slices.Insert(s.Owners, i, Ownership{Partition: c.Partition, Epoch: c.Epoch}), idindex.Index{}
	case PartitionsSet:
		ps := slices.Clone(c.Partitions)
		slices.SortFunc(ps, func(a, b Partition) int { return strings.Compare(a.ID, b.ID) })
		s.Partitions, s.PartitionSetStored = ps, true
	case Requested:
		// Nothing changes but the version: the owner acts on it.
	case LoadsReported:
		s.Loads = MergeLoads(s.Loads, c.Loads)
	default:
		return fmt.Errorf("apply: entry %d has unknown kind %v", c.Version.Seq, c.Kind)
	}
	s.Version = c.Version
	return nil
}

// ApplyAll applies the entries cs in order, as Apply does one by one, but
// in O(len(Owners) + k log k) for k new records instead of O(len(Owners))
// per new record: records that are not in s yet are gathered and merged
// into Owners once at the end. A member applies what one Changes call
// returned with it (a first placement of 100,000 partitions is 100,000
// new records). On error, s is left partly changed: the replica has
// diverged anyway and must be rebuilt from a new Snapshot.
func (s *Snapshot) ApplyAll(cs []Change) error { return s.ApplyAllFunc(cs, nil) }

// ApplyAllFunc is ApplyAll, calling seen (unless nil) with each entry just
// before it is applied, and the index in Owners of its partition's record
// as RecordIndex would return it then (-1: none, or an entry without a
// partition). A member checks each entry against its plan as it applies
// it: one lookup of the record for both (looking each record up twice was
// a sixth of the CPU of 110 members on 100,000 partitions balancing a join).
func (s *Snapshot) ApplyAllFunc(cs []Change, seen func(c Change, rec int)) error {
	var added map[string]*Ownership // records new to s, merged into Owners at the end
	// Records are looked up lookAhead entries at a time (prelocate): the
	// positions stay put until the merge.
	var pre [lookAhead]int32
	preFrom, preN := 0, 0
	var sc sessionCache
	// Each entry is read in place: a Change is 192 bytes, and copying
	// each one out of cs was 6% of ApplyAllFunc's samples in a CPU
	// profile of BenchmarkApplyFleet.
	for k := range cs {
		c := &cs[k]
		switch c.Kind {
		case Claimed, Released, Restored:
		default:
			if seen != nil {
				seen(*c, -1)
			}
			if err := s.Apply(*c); err != nil {
				return err
			}
			sc.known = false // the sessions may have changed
			continue
		}
		if c.Version.Seq != s.Version.Seq+1 {
			return fmt.Errorf("apply: entry %v does not follow version %v", c.Version, s.Version)
		}
		if k >= preFrom+preN {
			preFrom, preN = k, s.prelocate(cs[k:], pre[:])
		}
		i, found := int(pre[k-preFrom]), true
		if i < 0 {
			i, found = s.locate(c.Partition)
		}
		if found && s.index.Len() == 0 && len(s.Owners) >= indexFrom {
			// Entries about records s has: worth an index once they add
			// up to a sixteenth of the records (not for entries that add
			// records, which drop it), or at once if this call has that
			// many entries left (a member's copy, with a record for
			// every partition, applying a placement: the binary searches
			// until the sixteenth were a tenth of BenchmarkApplyFleet).
			if s.hits++; s.hits >= len(s.Owners)/16 || len(cs)-k >= len(s.Owners)/16 {
				s.index, s.hits = buildIndex(s.Owners), 0
			}
		}
		var cur *Ownership
		switch {
		case found:
			cur = &s.Owners[i]
		case added != nil:
			cur = added[c.Partition]
		}
		if seen != nil {
			if found {
				seen(*c, i)
			} else {
				seen(*c, -1)
			}
		}
		if err := s.applyRecord(c, cur, &added, &sc); err != nil {
			return err
		}
		s.Version = c.Version
	}
	s.mergeAdded(added)
	return nil
}

// indexFrom is the number of records from which ApplyAll locates records by
// an index (Snapshot.index) rather than by binary search: on 100,000
// records, a binary search of a partition's ID was 0.5 µs and most of the
// cost of applying an entry (100 members placing 100,000 partitions, each
// applying every claim: a tenth of that bench's CPU).
const indexFrom = 4096

// RecordIndex returns the index in Owners of the record of partition id,
// and whether there is one. It only reads s (by its index once ApplyAll
// built one, by binary search otherwise), so readers may share s.
func (s *Snapshot) RecordIndex(id string) (int, bool) { return s.locate(id) }

// locate returns the index in Owners of the record of partition id, and
// whether there is one (if not, where it would be inserted), by the index
// if it has id at the right place, by binary search otherwise.
func (s *Snapshot) locate(id string) (int, bool) {
	if i, ok := lookupIndex(s.index, s.Owners, id); ok {
		return i, true
	}
	return slices.BinarySearchFunc(s.Owners, id, func(o Ownership, id string) int { return strings.Compare(o.Partition, id) })
}

// keptMark is the GivenBack mark of a record after a claim by session: the
// record's mark, unless it names session (the giver took the partition
// again: the mark is cleared).
func keptMark(mark, session string) string {
	if mark == session {
		return ""
	}
	return mark
}
