package store

// What the store holds: partitions, sessions, ownership records, snapshots.

import (
	"slices"
	"strings"
	"time"

	"github.com/herdhq/herd/internal/idindex"
)

// Partition is one unit of work in a group.
type Partition struct {
	ID string
	// Weight is stored and returned as given (0 or more). The count
	// balance counts each partition as one whatever its weight; the
	// balance by load (once the published loads differ, see Load) counts
	// its load Weight times (see package balance). Member weights
	// (SessionInfo.Weight) are used by both.
	Weight int
}

// SessionInfo describes a live session as seen in a snapshot.
type SessionInfo struct {
	ID     string // store-assigned, unique for the life of the store
	Member string // the member id the session was opened for
	// Remaining is the TTL left on the store's clock when the snapshot was
	// taken. Members use it as a duration from the moment they received the
	// snapshot, never as an absolute time, so no clocks are compared.
	Remaining time.Duration
	// Weight is the member's capacity (0 is read as 1).
	Weight int
}

// Ownership is one partition's record. It survives its owner so that the
// checkpoint and epoch carry over to the next owner.
type Ownership struct {
	Partition string
	Session   string // owning session id; "" when released
	Member    string // owning session's member id ("" when released)
	Epoch     uint64
	// Checkpoint is the last value written by an owner (nil if none) in
	// the Ownership ClaimBatch returns. It is always nil in a Snapshot's Owners:
	// a snapshot never carries checkpoint values, which the plan does not
	// use and which would make every read of the group cost the size of
	// every checkpoint (256 partitions of 256 KiB: 64 MiB per read).
	Checkpoint []byte
	// GivenBack is the session that last gave the partition back
	// (GiveBack), "" if none. While that session is alive, members place
	// the partition on another live member if there is one. The mark
	// stays through releases and through claims by other sessions; a
	// claim by that session itself clears it, and so does Restore. A
	// mark naming a session that has ended is moot: readers check
	// Snapshot.Alive.
	GivenBack string
}

// Record is one partition's ownership record as Records returns it, for
// views (herd status, job blackboards); the run loop never reads it.
type Record struct {
	Ownership // Checkpoint included (nil if none was ever written)
	// Since is how long ago, on the store's clock, the record got its
	// current epoch (by ClaimBatch or Restore). 0 if unknown (a
	// record written by an older version).
	Since time.Duration
	// CheckpointAge is how long ago, on the store's clock, the checkpoint
	// was last written (Checkpoint, or Restore with a value); 0 if the
	// record has no checkpoint or the time is unknown.
	CheckpointAge time.Duration
}

// Snapshot is one consistent read of a group. It is read-only: backends
// may share one snapshot between callers. "Sorted" means Go string order.
type Snapshot struct {
	Sessions   []SessionInfo // live sessions, sorted by ID
	Partitions []Partition   // the group's partition set, sorted by ID
	Owners     []Ownership   // every ownership record, sorted by Partition
	// PartitionSetStored is true when the store holds a partition set for
	// the group, even an empty one (SetPartitions with no partitions), and
	// false when it holds none: never set, or lost with the store's data.
	// A reader tells "emptied on purpose" from "lost" by it, and must put
	// back a set it remembers only when this is false. (A backend that
	// predates the field leaves it false: readers then treat an empty set
	// as lost, the old behaviour.)
	PartitionSetStored bool
	// Kind is the group's kind (KindPartitions, KindKeys), "" if no member
	// has named one (see SetPartitions). Apply leaves it as it is: the log
	// does not carry it, and a group's kind changes only when the group is
	// deleted.
	Kind string
	// Malformed lists the records the store holds but could not decode
	// (written by hand, by another program or an incompatible version),
	// sorted by Kind then ID. Each is left out of the lists above, so one
	// bad record never makes the whole read fail. A malformed partition or
	// ownership record makes that partition unplaceable (see Malformed);
	// a malformed session is not counted as live.
	Malformed []Malformed
	// Loads is the latest load published (ReportLoads) for each partition
	// that has one, sorted by Partition: of partitions in the set or not,
	// owned or not. Apply merges a LoadsReported entry's loads into it.
	Loads []Load
	// Version is the point of the group's log (see Changes) this snapshot
	// shows: the state after the entry Version.Seq.
	// A group whose log was never written has the zero Version.
	Version Version
	// index locates records by partition for ApplyAll (see locate): built
	// by it on a large snapshot, shared by clones, never changed (a change
	// that moves records drops it), and checked at every use, so a caller
	// that changes Owners itself makes it slower, never wrong.
	index idindex.Index // see buildIndex
	hits  int           // records ApplyAll found by binary search, toward building index
}

// Kinds of Malformed records.
const (
	MalformedSession   = "session"   // a live session or its member record
	MalformedPartition = "partition" // an entry of the partition set
	MalformedOwnership = "ownership" // a partition's ownership record
)

// Malformed is one record Snapshot could not decode and left out.
//
// Members do not place a partition whose partition or ownership record is
// malformed: no member claims it until the record is repaired or deleted.
// Claiming it would overwrite a record that may hold a newer version's
// data, and the epoch in it is unknown, so a new epoch could not be shown to
// be larger. So a malformed record costs at most its own partition. Members
// log each malformed record once.
type Malformed struct {
	Kind   string // MalformedSession, MalformedPartition or MalformedOwnership
	ID     string // the session or partition id as stored, at most MaxIDLength bytes (longer ones are cut)
	Reason string // what is wrong with it, for a log line (quotes at most 64 bytes of a bad value)
}

// Alive reports whether the session with this id is in the snapshot
// (Sessions is sorted by ID in byte order).
func (s *Snapshot) Alive(session string) bool {
	_, ok := slices.BinarySearchFunc(s.Sessions, session, func(si SessionInfo, id string) int {
		return strings.Compare(si.ID, id)
	})
	return ok
}
