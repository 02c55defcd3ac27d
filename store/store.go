// Package store defines the contract between herd's member runtime and the
// database it coordinates through. A backend (memstore, redisstore, ...)
// implements Store; the conformance suite in store/storetest checks that it
// keeps every rule written here.
//
// The contract is deliberately small. It knows sessions (a member's
// liveness, with a TTL counted by the store's own clock), ownership records
// (one per partition: owning session, epoch, checkpoint), the group's
// partition set, a snapshot read and the group's log of changes (Changes).
// It knows nothing about balancing: that is decided by every member from
// its copy of the group.
//
// # Rules every backend keeps
//
//   - Every operation that changes a record is atomic and conditional, as
//     written on each method: two members racing for one partition cannot
//     both succeed.
//   - Session expiry is decided by the store's clock alone. A session is
//     alive from OpenSession until CloseSession, or until TTL has passed on
//     the store's clock since the last successful OpenSession/KeepAlive.
//   - An ownership record is valid only while the session named in it is
//     alive. A record whose session is dead or empty is free to claim.
//   - Epochs strictly increase on every successful claim of a partition
//     and never repeat, even if the store loses its data: a backend derives
//     a new epoch as max(previous+1, store time in microseconds).
//   - Checkpoint, ReleaseBatch and GiveBack are fenced: they succeed only if
//     the record's epoch equals the caller's and the record's session is
//     alive. Otherwise nothing is written and ErrNotOwner is returned.
//   - Every change to a group appends one entry to the group's log (see
//     Change and Changes), in the same atomic operation as the change:
//     a session opened (OpenSession), closed (CloseSession) or expired (by
//     any call that notices it, ExpireSessions among them), a claim
//     (ClaimBatch), a release (ReleaseBatch, GiveBack), a record
//     restored (Restore), a partition set stored (SetPartitions). A
//     request (Request) and a load report (ReportLoads) are entries too,
//     though they change no record.
//     Renewals and checkpoints are not changes of the group and log nothing. The log is
//     ordered and gap-free: entry n+1 follows entry n, and a snapshot at
//     version v plus the entries after v (Snapshot.Apply) is the group as a
//     later snapshot shows it (sessions' Remaining aside). DeleteGroup
//     deletes the log: the next write starts a new history (Version).
package store

import (
	"context"
	"errors"
	"time"
)

// Sentinel errors. Backends wrap driver errors onto these so callers can use
// errors.Is whatever the database.
var (
	// ErrSessionExpired: the session is unknown to the store (expired,
	// closed, or lost with the store's data). The member must open a new one.
	ErrSessionExpired = errors.New("herd: session expired")
	// ErrNotOwner: a fenced write (Checkpoint, ReleaseBatch, GiveBack) named an epoch that
	// is no longer current, or the owning session is no longer alive.
	ErrNotOwner = errors.New("herd: not the owner of the partition (epoch is stale or session expired)")
	// ErrClaimed: a claim found the partition held by another live session.
	ErrClaimed = errors.New("herd: partition is owned by another live session")
	// ErrInvalid: an id or argument is malformed (empty, too long, invalid UTF-8).
	ErrInvalid = errors.New("herd: invalid argument")
	// ErrUnavailable: the store could not be reached or did not answer in time.
	ErrUnavailable = errors.New("herd: store unavailable")
	// ErrCorrupt: a record in the store could not be decoded (written by
	// something other than herd, or by an incompatible version). Snapshot
	// does not return it for single records (it lists them in
	// Snapshot.Malformed); a call on such a record, or a read of a whole
	// key the store cannot use (of the wrong type), does.
	ErrCorrupt = errors.New("herd: malformed record in store")
	// ErrGroupInUse: DeleteGroup found live sessions in the group and was
	// not told to force.
	ErrGroupInUse = errors.New("herd: group has live members")
	// ErrVersionGone: Changes was asked for the entries after a version the
	// store can no longer continue from (trimmed from the log, of another
	// history of the group, or ahead of the store). The caller takes a new
	// Snapshot and continues from its Version.
	ErrVersionGone = errors.New("herd: version no longer available in the group's log")
	// ErrGroupKind: the group is of another kind than the caller (a jobs
	// member joining a group of partitions, or the reverse; see
	// KindPartitions, KindKeys). Nothing was written.
	ErrGroupKind = errors.New("herd: group is of another kind")
)

// Store is what a backend implements: 17 methods, each one operation that
// the member runtime (package herd), the jobs scheduler or the herd tool
// calls (docs/store-contract.md lists who calls which). There is one way to
// do each thing: a single claim or release is a batch of one (store.Claim,
// store.Release), not a method of its own.
//
// Every method that blocks takes a context and returns promptly when it is
// cancelled. All methods are safe for concurrent use. Every method checks
// its arguments first with the Validate function named after it (args.go),
// so every backend rejects the same bad arguments with ErrInvalid before
// touching anything: a malformed group, member, partition or session id
// (ValidateID), a negative weight, a TTL <= 0, epoch 0, a checkpoint longer
// than MaxCheckpointLength, a batch too large or with a partition twice.
//
// What the next backends and views need fits in these methods without
// changing their meaning:
//   - Version is per group ({Tag, Seq}, Seq gap-free): a store whose own
//     revisions are cluster-wide (etcd) keeps a per-group sequence of its
//     own next to the log.
//   - A batch (ClaimBatch, ReleaseBatch, Records) need not be one atomic
//     operation: each partition's claim or release is. A backend whose
//     transactions are bounded (etcd: 128 operations) may split a batch;
//     a whole-call error after some parts were written is then a lost
//     reply, which the runtime already survives (a claim by the session
//     the record names gets a new epoch).
//   - A session is opened by OpenSession and ends at CloseSession or its
//     TTL; a backend may tie it to its connection (ending it when the
//     connection dies) without a new method: OpenSession is where it binds.
//   - Change and Record are structs: a store time on log entries, or ages
//     of checkpoints and sessions for a view, are fields added to them.
type Store interface {
	// Sessions: a member's liveness.

	// OpenSession creates a live session for member in group with the given
	// TTL and the member's capacity weight, and returns its id, which is
	// unique for the life of the store (it is never reused, not even for
	// the same member; NewSessionID makes such ids). Logs SessionOpened.
	// Called by a member when it joins or lost its session.
	OpenSession(ctx context.Context, group, member string, weight int, ttl time.Duration) (string, error)
	// KeepAlive extends a live session to ttl from now on the store's clock.
	// ErrSessionExpired if the session is not alive. It logs nothing about
	// its own session; a backend may expire other sessions it finds expired
	// (logging SessionExpired for each). ErrInvalid if ttl <= 0.
	//
	// It returns next, the time on the store's clock until the earliest
	// expiry of a live session of the group (this one, renewed, included):
	// until then no session can expire, so a member learns when to call
	// ExpireSessions from its renewals, without extra operations. Called by
	// a member once per renew interval: the steady cost of a fleet.
	KeepAlive(ctx context.Context, group, session string, ttl time.Duration) (next time.Duration, err error)
	// CloseSession ends a session at once; the records it owned become free.
	// Closing an unknown session is not an error. Logs SessionClosed.
	// Called by a member when it leaves.
	CloseSession(ctx context.Context, group, session string) error
	// ExpireSessions ends every session of the group whose TTL has passed
	// on the store's clock, logging SessionExpired for each, and returns
	// next, the time until the earliest expiry of a live session of the
	// group (0 if none is alive). Any call may notice and expire due
	// sessions (every one that does logs them too, each exactly once);
	// ExpireSessions is how a member whose replica says a TTL has passed
	// makes it happen.
	ExpireSessions(ctx context.Context, group string) (next time.Duration, err error)

	// Reads of the group: a snapshot to start from, the log to follow.

	// Snapshot reads the group: live sessions, partition set, ownership
	// records, in one consistent read. The records carry no checkpoint
	// (Ownership.Checkpoint is nil): ClaimBatch returns the one a new owner
	// needs. Snapshot.PartitionSetStored says whether a partition set is
	// stored at all. A record that cannot be decoded is left out and
	// listed in Snapshot.Malformed; Snapshot fails with ErrCorrupt only
	// when the group cannot be read at all (a key of the wrong type).
	// Called by a member when it joins or its copy of the group cannot be
	// continued (ErrVersionGone), and by views (herd status).
	Snapshot(ctx context.Context, group string) (*Snapshot, error)
	// Changes returns the entries of the group's log after version after,
	// in order and without gaps, at most max of them (max >= 1), and the
	// version after the last one returned (each entry's Version is the
	// group's version after it; apply them with Snapshot.ApplyAll). It
	// returns fewer than max entries only when the log held no more after
	// them when the call read it, so a caller that got fewer has every
	// entry appended before its call began (members rely on it to tell a
	// copy that is behind from one that is wrong). If there
	// is none yet it blocks until one is appended or ctx ends; a backend may
	// also bound how long one call blocks and then return no entries, the
	// version after and no error (the caller calls again). When ctx's
	// deadline comes while it waits, having read the log to its end, it
	// returns the same (no entries, no error): the log was at rest until
	// then. An error for the deadline means that the store did not answer
	// in time (members tell the two apart when they join). ErrVersionGone
	// if the log cannot be continued from after: its entries were trimmed,
	// it is of another history (the group was deleted, or the store lost its
	// data or its latest writes, since), or it is ahead of the store; then
	// the caller takes a new Snapshot. Changes with the zero Version (a group
	// never written) returns ErrVersionGone as soon as the group's log is
	// written. ErrInvalid if max < 1. The returned entries are read-only.
	// Called by every member, all the time: it keeps its copy of the group.
	Changes(ctx context.Context, group string, after Version, max int) ([]Change, Version, error)
	// Records reads the ownership records of the given partitions, with their
	// checkpoints and times, in one consistent read. At most MaxBatch
	// partitions, valid ids, none twice (ValidateBatch), else ErrInvalid.
	// The result is in the order asked; a partition with no record is left
	// out, and so is a record that cannot be decoded (Snapshot lists it in
	// Malformed). It changes nothing and logs nothing. Called by views
	// (herd status, job blackboards) and by a member that checks that the
	// records of the partitions it runs still name it.
	Records(ctx context.Context, group string, partitions []string) ([]Record, error)

	// Writes: the partition set and the ownership records.

	// SetPartitions stores the group's partition set as set.Mode says
	// (SetReplace, SetIfAbsent, SetKindOnly), and checks and records the
	// group's kind, atomically: the rule is DecideSet's. A group of another
	// kind than set.Kind refuses with ErrGroupKind and nothing is written.
	// The store keeps the set's Digest with it and compares digests first,
	// so a set equal to the stored one costs it O(1) whatever its size, is
	// not written again and logs nothing; a network backend sends the
	// digest alone first and the whole set only if the store needs it. An
	// empty set is stored as such (Snapshot.PartitionSetStored stays true).
	// Ownership records of removed partitions are kept (with their
	// checkpoints) until the partition returns. A write logs PartitionsSet.
	// ErrInvalid if ValidateSet rejects set. Called by a member when it
	// joins, by the jobs scheduler and by herd partitions set.
	SetPartitions(ctx context.Context, group string, set PartitionSet) (SetResult, error)
	// ClaimBatch makes session the owner of each partition, in order, in as
	// few operations as the store allows (one, on Redis), at a new epoch
	// (NextEpoch of the record's), if the partition has no record, or its
	// record is released, or its owning session is dead, or its owning
	// session is session itself. The checkpoint is kept, and returned in
	// the Ownership (the only call that returns one). A claim by the
	// session the record already names also gets a new epoch: the caller
	// may not be running the partition at the record's epoch (a claim
	// whose reply was lost, a record brought back by a failover to a
	// replica that missed later writes), and a member must never run a
	// partition at an epoch older than the newest it could know of. A
	// retried claim is still harmless: the caller runs the newest epoch and
	// the old one is fenced. The record's GivenBack mark is kept, unless it
	// names session, which clears it (the returned Ownership shows the
	// result).
	//
	// results[i] is partitions[i]'s: the Ownership with its checkpoint, or
	// ErrClaimed (another live session owns it) or ErrCorrupt for that
	// partition alone. A whole-call error (ErrSessionExpired if session is
	// not alive, ErrUnavailable, ErrInvalid for more than MaxBatch
	// partitions, a duplicate or a malformed id) means no result. One
	// Claimed entry is logged per claimed partition. Called by a member to
	// take the partitions its plan gives it; store.Claim is a batch of one.
	ClaimBatch(ctx context.Context, group, session string, partitions []string) ([]ClaimResult, error)
	// ReleaseBatch gives up each held record (its Partition and Epoch; the
	// other fields are ignored) by session, in order, in as few operations
	// as the store allows: if the record's epoch equals the held epoch and
	// its session is session and alive, the record's session is cleared
	// (checkpoint, epoch and GivenBack mark kept). errs[i] is held[i]'s:
	// nil, ErrNotOwner or ErrCorrupt. A whole-call error (ErrUnavailable,
	// ErrInvalid for more than MaxBatch records, a duplicate partition, a
	// malformed id or epoch 0) means no result. One Released entry is
	// logged per release. Called by a member that hands partitions over or
	// stops; store.Release is a batch of one.
	ReleaseBatch(ctx context.Context, group, session string, held []Ownership) (errs []error, err error)
	// GiveBack is a release of one partition that also marks the record as
	// given back by session: while that session lives, members place the
	// partition on another live member if there is one (the mark stays on
	// the record through later claims by other sessions; a claim by session
	// itself, or the end of session, makes it moot). ErrNotOwner unless the
	// record's epoch equals epoch and its session is session and alive;
	// ErrInvalid for epoch 0 or a malformed id. Logs one Released entry
	// with GivenBack set to session. Called by a member whose handler
	// returned herd.ErrGiveBack.
	GiveBack(ctx context.Context, group, partition, session string, epoch uint64) error
	// Checkpoint stores value in the partition's record if the record's
	// epoch equals epoch and its session is alive. ErrNotOwner otherwise,
	// and nothing is written; ErrInvalid for epoch 0 or a value longer than
	// MaxCheckpointLength. Logs nothing. Called by a running handler
	// through herd.Claim.Checkpoint (jobs and herd run's checkpoint socket
	// included).
	Checkpoint(ctx context.Context, group, partition string, epoch uint64, value []byte) error
	// Restore re-creates a lost record: if the partition has no record at
	// all, or a released record (no session) whose epoch is lower than
	// epoch, it writes a released record with this epoch and checkpoint
	// (and no GivenBack mark).
	// ErrNotOwner otherwise (nothing is written). Members call it after
	// losing their session, with the last checkpoint they had written, so
	// that a store that lost its data (restarted without persistence) gets
	// their progress back before anyone claims the partition anew. Records
	// are never deleted otherwise and epochs only grow, so without a data
	// loss Restore never finds a record to write over. After one, members
	// that held the partition one after the other may all restore it:
	// epochs increase with every owner, so the last owner's progress wins
	// whatever the order of the calls. ErrInvalid for epoch 0 or a value
	// longer than MaxCheckpointLength. Logs Restored.
	Restore(ctx context.Context, group, partition string, epoch uint64, value []byte) error

	// Request appends a Requested entry for r to the group's log, and
	// changes nothing else: no record, no session. It takes no session and
	// no epoch: it is the channel through which something that owns
	// nothing (the dashboard, an operator) asks the owner of a key or a
	// member to act, and the owner, which follows the log, acts on it
	// under its own epoch (see Request for who acts, and what happens to
	// a request nobody owns the target of). A group whose log was never
	// written gets one, as with any other write. ErrInvalid if
	// ValidateRequest rejects r. Called by the dashboard (herd dashboard
	// --allow-actions).
	Request(ctx context.Context, group string, r Request) error

	// ReportLoads publishes the loads of partitions that session runs
	// (see Load): if session is alive, it appends one LoadsReported entry
	// naming session and carrying the loads (sorted by partition), and
	// makes each load its partition's latest (Snapshot.Loads), atomically.
	// It changes no record and does not check who owns the partitions:
	// the balance only reads loads, so a report cannot break a fence.
	// ErrSessionExpired if session is not alive (nothing is written);
	// ErrInvalid if ValidateReportLoads rejects the arguments. A backend
	// whose transactions are bounded (etcd) may split a report into
	// several entries, each atomic, as it splits a batch. Called by a
	// member once per report interval, with the loads that changed
	// beyond a threshold since it last published them.
	ReportLoads(ctx context.Context, group, session string, loads []Load) error

	// DeleteGroup removes everything the store holds for group: sessions,
	// partition set and kind, ownership records and checkpoints, in one atomic
	// operation. If a session of the group is alive it refuses with
	// ErrGroupInUse and deletes nothing, unless force is set: then the live
	// sessions are deleted too (their members find them expired, and may
	// write back what they know, as after a store that lost its data; stop
	// them first). Deleting a group that holds nothing is not an error.
	// Called by herd group delete and herd.DeleteGroup.
	DeleteGroup(ctx context.Context, group string, force bool) error

	// Close releases the backend's resources (not the sessions).
	Close() error
}
