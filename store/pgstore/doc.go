// Package pgstore is the PostgreSQL backend of herd's store.Store, built
// on pgx v5 (pgxpool).
//
//	s, err := pgstore.Open(ctx, "postgres://herd:secret@db.internal:5432/app?schema=herd")
//	// or, with a pool you already have:
//	s, err := pgstore.New(ctx, pool, pgstore.WithSchema("herd"))
//
// # Tables
//
// Everything lives in one schema (default herd; ?schema= or WithSchema),
// created with its tables and functions by the first store that finds it
// missing, in one transaction (concurrent first opens install it once).
// The table schema_version records the version of the layout
// (SchemaVersion); a store refuses a schema of a later version, written by
// a newer herd, with an error that says so. A store whose schema is
// dropped while it runs creates it again at its next call.
//
//	groups      one row per group: gid, name, the log's last (seq, tag), where it starts, partset, kind (the group's kind) and digest (store.Digest of its set)
//	sessions    (gid, id): member, weight, expires (server time)
//	partitions  (gid, id): weight
//	owners      (gid, partition): session, member, epoch numeric(20,0), given_back,
//	            claimed_at, checkpoint bytea, checkpoint_at
//	log         (gid, seq): tag, kind and the entry's columns
//
// Ids are text COLLATE "C" (byte order, as store.Snapshot wants), passed as
// parameters, never pasted into SQL. Epochs are numeric(20,0), so every
// uint64 is exact.
//
// # Atomicity and time
//
// Every operation that reads and writes is one call of a PL/pgSQL function
// (or, for Checkpoint, one UPDATE), so one statement and one transaction,
// and one round trip; a batch of up to store.MaxBatch claims or releases
// is one set-based statement inside it. Each function that changes a
// group first locks the group's row, then expires the group's due
// sessions, makes its change, appends its log entries, and updates the
// group's version, in the same transaction. The fenced writes check the
// epoch and the owner's liveness in the statement that writes (the
// Temporal range_id way): a stale owner's write matches no row. No
// advisory locks and no session state are used, so the store works behind
// a pooler in transaction mode (with ?listen=off, and pgx's
// default_query_exec_mode=exec if the pooler does not keep prepared
// statements); session ties are the exception.
//
// # Session ties
//
// TieSession (store.ConnTied, used by herd.Config.TieSession) ties a
// session to a connection of its own, outside the pool: a session-level
// advisory lock keyed by the session, and a row of the table ties. The
// connection then runs watch in a loop, which waits (one statement per
// 60 s while the ring is steady, in rounds that commit and send the
// member a heartbeat) for the lock of the next tie of the group, in id
// order around a ring, and marks cut every tie whose lock is free,
// capping its session's expiry at the cut plus the tie's grace; the tie that saw the cut calls
// ExpireSessions when the grace has passed, and ExpireSessions cuts free
// ties first. One connection per tied member, no N x N connections. The
// tied connection sets its own timeouts so that a network cut cannot end
// it on the server's side before the member fenced itself. Ties need
// session state: never behind a pooler in transaction mode. See
// docs/takeover.md.
//
// All time is the server's clock_timestamp(), read in the function. A
// session is alive while its expires is later than that. KeepAlive
// updates one row and takes the group's lock only when a session of the
// group is due (it then expires it, logged, first); Snapshot expires due
// sessions and then reads the group in one statement, so the sessions it
// lists are exactly those the log has not ended. KeepAlive and
// ExpireSessions answer the time until the group's next expiry.
//
// # Log and wake-ups
//
// The log is a table appended by the function that makes the change, under
// the group's row lock, so it is gap-free and its entries commit in order;
// see log.go for versions, tags and trimming (WithLogLimit, ?log_limit=).
// Changes reads it by version. At the end of the log it waits for a
// notification: every function that appends sends pg_notify(<schema>_changes,
// <group>), delivered at commit; renewals and checkpoints append nothing
// and notify nothing. One connection per store, outside the pool, LISTENs
// and wakes the waiting calls of the group. A notification carries the
// entries it announces when they are few and small, so a waiting reader
// usually takes them from there, and knows without a read that nothing
// else was appended; a big batch or a partition set is read from the
// table. The connection is checked (a
// notification the store sends itself must come back) and made again after
// it is lost, and then every waiting call reads once from its own version.
// Without it (?listen=off, a failed check, or while it is down) a waiting
// call reads every poll interval (?poll_interval=, default 500ms); with it,
// every 10 s as a backstop.
//
// Each entry holds its time (column at, store.Change.At): the server's
// statement_timestamp() of the call that appended it, the column's
// default, so every function (an older herd's too) fills it. A store adds
// it to a schema of version 2 that predates it (logTimeSQL in schema.go).
//
// # Epochs never repeat
//
// A claim's epoch is max(previous+1, server time in µs) (store.NextEpoch),
// computed in the function. If the rows are lost (the schema dropped, a
// restore from an older backup, a failover to a replica that missed the
// latest commits) the next epoch is the server's time in µs, above every
// epoch handed out before as long as the server's clock has not gone back
// by more than the time since the last claim. Session ids are 130 random
// bits made by the client, so they do not repeat either.
//
// # Effectively once
//
// InTx runs a caller's function in a transaction with the partition's
// checkpoint, fenced by the claim's epoch: a member that lost the
// partition can neither checkpoint nor write anything in that transaction.
//
// # Errors
//
// Connection failures, timeouts and an overloaded or restarting server are
// store.ErrUnavailable; a malformed URL, an unknown database or setting, a
// standby, an old server or a newer schema are store.ErrInvalid. No message
// contains the password (pgx's parse errors quote the URL: they are
// rebuilt with the password replaced by xxxxx).
package pgstore
