// Package sqlitestore is the SQLite backend of herd's store.Store: one
// database file shared by the members of one host, in one process or many.
// It is herd run's default store (sqlite://herd.db in the working
// directory). It is built on modernc.org/sqlite, SQLite compiled to pure Go:
// no cgo, no server.
//
//	s, err := sqlitestore.Open(ctx, "sqlite:///var/lib/herd/herd.db")
//	s, err := sqlitestore.Open(ctx, "sqlite://herd.db") // relative to the working directory
//
// # The file
//
// The database runs in WAL mode (readers never wait for the writer, and
// the writer never waits for readers) with synchronous=FULL: every commit
// is on disk before the call returns, so an epoch handed out, a claim or a
// checkpoint survives a power loss. Write transactions begin IMMEDIATE:
// they take the file's write lock before their first read, so that what a
// call checks (the record's epoch, the session's deadline) is still true
// when it writes. Every call that changes something is one transaction:
// the check, the change, and the entries it appends to the group's log.
//
// Writers queue for the file in the kernel first, on an exclusive flock
// of the sidecar file <file>-herd (lock_unix.go): SQLite's own lock has no
// queue, and a writer that finds it taken sleeps between attempts (1, 2,
// 5 ... 100 ms), so with many members writing at once the lock sat free
// while they slept. Writes of one Store queue in Go before that, in
// arrival order but with session renewals first (writeAs). A write
// waits for as long as its context allows; SQLite's busy timeout (5 s,
// WithBusyTimeout) bounds the wait for writers that do not take the flock
// (a sqlite3 shell).
//
// A file is recognised as herd's by its header (PRAGMA application_id
// "herd", user_version the schema version, SchemaVersion), and the schema
// is created on first use, in one transaction even when several processes
// open a new file at once. Open refuses, with an error that says what to
// do, a directory that does not exist or cannot be written (SQLite keeps
// <file>-wal and <file>-shm next to the database; herd adds <file>-herd),
// a read-only file, a file that is not SQLite, an SQLite database
// of another application (one with tables of its own, or another
// application_id), a herd database of a newer schema, and (Linux) a file
// on a network file system: NFS, SMB/CIFS, AFS, Coda, Ceph, 9P, GFS2,
// OCFS2 and Lustre, by statfs. There SQLite's locks and WAL's shared
// memory do not hold between hosts, so two members on two hosts could both
// own a partition; ?network_fs=allow overrides the refusal for a file that
// only processes of one host use. A FUSE file system cannot be told apart
// from a local one and is not refused.
//
// The path, not the file, is the store's address (file.go): every call,
// and the notifier every second, checks that the path still names the file
// the connections hold (device and inode). A file removed or replaced (mv)
// is left for good and the path opened anew, which members handle as a
// store that lost its data, instead of owning partitions for ever in a
// file nobody else sees. A file overwritten in place is not detected.
//
// Tables (schema.go): herd_groups (one row per group: the log's last
// sequence number and tag, whether a partition set is stored),
// herd_sessions, herd_partitions, herd_owners (records without their
// checkpoints, so a snapshot scans small rows), herd_checkpoints,
// herd_log and herd_meta. Every table is STRICT. A row written by hand or
// by another program that herd cannot use (a malformed id, epoch 0, a
// session id of the wrong form) is left out of a snapshot and listed in
// Snapshot.Malformed; a call on that very record fails with
// store.ErrCorrupt.
//
// # Time: this host's wall clock
//
// Sessions expire by the host's wall clock, which every process on the
// host reads alike (the monotonic clock starts again at every boot, and
// the file outlives one). A session's deadline is stored as a time:
// renewal writes now+TTL, and the session is alive while the clock is
// before it. When the wall clock is stepped (by hand, or by NTP at boot;
// NTP slews small errors without stepping):
//
//   - backwards by D: every deadline is D further away, so sessions live up
//     to D longer, and a crashed member's partitions are taken over up to D
//     late. Snapshot.Remaining and KeepAlive's next never show more than
//     the session's TTL, so no member plans past its own TTL.
//   - forwards by D: deadlines come D early; if D is more than what is left
//     of a session's TTL, that session expires though its member is alive.
//     Its partitions may then be claimed while its handlers still run, for
//     at most one renewal interval: the member's next KeepAlive fails, and
//     it cancels its handlers. Their writes are fenced meanwhile: the
//     takeover's Claim gave a new epoch, so their Checkpoint and Release
//     fail with store.ErrNotOwner, as do the user's writes fenced with the
//     epoch.
//
// So a step back delays, a step forward can make two handlers overlap for
// a moment, and neither can make a stale write succeed.
//
// Epochs are store.NextEpoch of the record's previous epoch and the clock:
// max(previous+1, now in µs). The previous epoch is in the file, so epochs
// of a record only grow, whatever the clock does. DeleteGroup keeps the
// highest epoch of the group it deletes in herd_meta, and claims use it as
// a floor, so a group deleted and written again does not repeat an epoch
// either. Only a new file (the old one deleted) relies on the clock alone,
// as a store that lost its data does.
//
// # The log
//
// Every change appends its entries to herd_log in its own transaction,
// numbered without gaps per group. Tags chain the entries (a hash of the
// previous tag and the entry, from a random start per history), so a
// reader never continues into another history: the group deleted and
// written again, or the file replaced by an older copy and written on. The
// log keeps the last WithLogLimit entries (DefaultLogLimit, 100,000) and
// Changes returns store.ErrVersionGone for a version it no longer has.
// Each entry holds its time (column at, store.Change.At): the writing
// transaction's wall clock, shared by its entries; Open adds the column to
// a file of a herd before it (schema.go), whose entries have none.
//
// # Wake-ups
//
// Changes waits at the end of the log without polling hard. A Store that
// appends to a log wakes its own readers at once, and rings a doorbell:
// it writes a byte to <file>-herd, which every Store on the file watches
// with inotify (Linux), so readers in other processes wake 0.1-0.3 ms
// after the commit, and readers of a file at rest cost nothing. The
// doorbell is rung after the commit, so a woken reader finds the entries;
// renewals and checkpoints ring nothing. PRAGMA data_version, polled every
// second on a connection of its own, is the backstop (a writer that died
// between its commit and the ring); where inotify is not available (other
// systems, or fs.inotify.max_user_instances reached) it is polled every
// 10 ms. Polling alone was measured at 1.1 ms median wake-up and 1% of a
// core per idle Store at 1 ms, 9.5 ms and 0.46% at 10 ms (BenchmarkWake,
// BenchmarkIdle).
//
// # Snapshots
//
// A snapshot reads the group's sessions every time, but takes the
// partition set and the records from the Store's last snapshot of the
// group, with the log entries since applied (cache.go): reading the 20,000
// rows of a group of 10,000 partitions cost about 25 ms of CPU, and members
// re-read their group on every change while partitions move. Rows changed
// without the log (by hand) show at the next full read, at most 10 s
// later; calls on such a record read its row and see the change at once.
//
// # Session ties
//
// The Store implements store.ConnTied (tie.go, docs/takeover.md): a tied
// session's member holds an exclusive flock on <file>-herd-ties/<session>
// for the tie's life, and the kernel releases it the moment the process
// dies. Each tie waits in the kernel for the next tie's lock, around a
// ring of the group's ties, and ExpireSessions tries every tie's lock as
// the backstop; a session whose lock is free ends the tie's grace later,
// not its TTL later. A lock file removed or replaced never reads as free:
// its member fences and the session keeps its TTL.
//
// # Limits
//
// One writer at a time for the whole file, and every commit waits for the
// disk: on a 2-core machine (docs/sqlite.md) a commit took 0.3-2 ms (the
// fsync alone 0.2-0.5 ms), so the file takes roughly 500-3,000 changes a
// second in all, whatever the number of processes (a ClaimBatch of 1,000
// partitions is one commit).
// A process stopped (SIGSTOP, a debugger) in the middle of a write
// transaction holds the write lock until it continues: every other
// process's writes wait, renewals included, and members that cannot renew
// in time fence themselves. A process killed in one releases the lock at
// once (the kernel drops its locks, SQLite rolls the write back).
package sqlitestore
