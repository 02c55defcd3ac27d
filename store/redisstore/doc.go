// Package redisstore is the Redis backend of herd's store.Store, built on
// go-redis v9.
//
//	s, err := redisstore.Open(ctx, "redis://user:secret@redis.internal:6379/0?prefix=myapp")
//	// or, with a client you already have (standalone, cluster, failover):
//	s := redisstore.New(client, redisstore.WithPrefix("myapp"))
//
// # Deployments
//
// The URL's scheme picks the deployment:
//
//	redis://[user:password@]host[:port][/db]           one server (rediss:// for TLS, unix:// for a socket)
//	redis+cluster://[user:password@]host:port,...      Redis Cluster, any seed nodes (rediss+cluster://)
//	redis+sentinel://[user:password@]host:26379,.../mastername[/db]
//	                                                   primary and replicas behind Sentinel (rediss+sentinel://)
//
// Open parses the URL strictly (see Open), dials once within the dial
// timeout, and checks each server that will hold the keys: Redis
// MinServerVersion or later, a primary, and the kind the scheme names.
//
// Failovers (Sentinel, or Cluster with replicas) keep the store working:
// go-redis follows the new primary. They are not free of loss. Replication
// is asynchronous, so writes the old primary acknowledged but had not sent
// are gone: sessions (the member's next KeepAlive returns
// store.ErrSessionExpired and it rejoins), claims (the claimant's next
// Checkpoint returns store.ErrNotOwner; until then its handler and one of
// the previous owner may both run) and checkpoints (they go back to what
// the replica had; Restore puts back the ones whose record vanished
// altogether). Session expiry and epochs follow the clock of whichever
// server is primary, so epochs stay unique as long as the new primary's
// clock is not behind the old one's by more than the time since the last
// claim. The store does not issue WAIT: it would make such losses rarer,
// at a round trip to a replica per write, but it is not consensus (a write
// stays applied on the primary when WAIT times out, and the promoted
// replica need not be the one that acknowledged). docs/redis.md ("What a
// failover can and cannot guarantee") says more.
//
// # Logging
//
// go-redis logs through one process-wide logger. The first Open routes it
// to log/slog's default logger (attribute
// component=go-redis): pool and connection messages at debug level,
// Sentinel and Cluster topology changes at info. A program that calls
// redis.SetLogger after its first Open keeps its own logger. New changes
// nothing: the client and its logging belong to the caller.
//
// # Keys
//
// Every key of a group carries the same Redis Cluster hash tag, the group
// id in unpadded base64url (so braces, colons or spaces in the id cannot
// break the tag or collide with another group):
//
//	<prefix>:{<b64 group>}:sessions     ZSET  session id -> expiry (µs, server clock)
//	<prefix>:{<b64 group>}:members      HASH  session id -> "<weight>:<member id>"
//	<prefix>:{<b64 group>}:partitions   HASH  partition id -> "<weight>"
//	<prefix>:{<b64 group>}:partset      STRING "2" (or "1", written by older versions): a partition set is stored (even an empty one)
//	<prefix>:{<b64 group>}:setinfo      HASH  kind -> the group's kind, digest -> store.Digest of the stored set
//	<prefix>:{<b64 group>}:partlist     STRING the partition set sorted by id, what Snapshot reads (partlist.go)
//	<prefix>:{<b64 group>}:owners       HASH  partition id -> "<epoch>:<session>:<member id>"
//	<prefix>:{<b64 group>}:checkpoints  HASH  partition id -> checkpoint bytes
//	<prefix>:{<b64 group>}:epochat      HASH  partition id -> "<epoch>:<µs>" (server time the record got that epoch)
//	<prefix>:{<b64 group>}:ckptat       HASH  partition id -> "<µs>" (server time of the last checkpoint write)
//	<prefix>:{<b64 group>}:givenback    HASH  partition id -> session id of the last GiveBack (the record's GivenBack mark)
//	<prefix>:{<b64 group>}:log          STREAM the group's log: ids "<seq>-<tag>", fields "e" (entry), "t" (server µs)
//	<prefix>:{<b64 group>}:version      STRING "<tag>:<seq>" of the log's last entry
//
// Every SetPartitions also writes partset, since Redis deletes an empty
// hash: an emptied set then reads as stored and empty, and neither key
// existing means the set was never stored or was lost
// (Snapshot.PartitionSetStored). A separate key, not a marker field in the
// partitions hash, so that members of a version that predates it read the
// hash as before during a rolling upgrade.
//
// The GivenBack mark of a record is likewise a field of its own hash, not a
// part of the owners value, which every version reads: GiveBack sets it, the
// giver's own claim and Restore delete it. A record without one (written
// before GiveBack existed) has no mark, and a Released entry of the log
// without the fifth field is a plain release.
//
// Partition, member and session ids are hash fields and values, which are
// binary safe. A record that does not decode (written by hand, by another
// program or another version: a garbage value, an id with control
// characters, a session id this store does not make, a live session without
// its member record) is left out of a Snapshot and listed in
// store.Snapshot.Malformed, naming its key; a call that needs that very
// record (a Claim of its partition) fails with an error wrapping
// store.ErrCorrupt and overwrites nothing. The scripts never fail on such
// values. A whole key of the wrong type (WRONGTYPE) fails every call that
// reads it, Snapshot included, with store.ErrCorrupt.
//
// # Atomicity and time
//
// Every operation that reads and writes is one Lua script (EVALSHA, with
// EVAL when the server does not have it cached), so it is atomic: two
// members racing for a partition are serialised by the server, and the
// fenced writes check epoch and session liveness in the same step as they
// write. All time comes from redis.call('TIME') inside the scripts, the
// store's clock; no member's clock is ever compared with it. Redis 7
// replicates scripts only by their effects, so reading the clock in a
// script that writes is allowed and replicas replay the writes, not the
// reading; this is why Open requires MinServerVersion.
//
// A session is alive while its expiry score is later than the server's
// current time. The scripts of OpenSession, KeepAlive, CloseSession,
// Claim, Release and their batches first remove (at most 256) sessions
// whose expiry has passed, logging SessionExpired for each; Snapshot removes every one, so the sessions it lists are
// exactly those the log has not ended; ExpireSessions removes them 1,000
// per script until none is due. KeepAlive and ExpireSessions answer the
// time until the earliest expiry, so a member knows when to call
// ExpireSessions without polling. Liveness checks compare the expiry with
// the clock, so they do not depend on that removal having happened.
//
// # Log
//
// Every script that changes the group appends its entries to the group's
// stream in the same script (see log.go for the encoding: the changes of
// one script, a batch of claims say, are entries of up to 100 changes),
// and trims it with XADD MINID ~ (WithLogLimit, default 100,000 changes,
// about 88 bytes each for claims). Entries are chained by their tags, so a reader
// never continues into another history of the group (deleted and written
// again, or a failover that lost the latest entries). Each entry carries
// the writing script's TIME, the Change.At of its changes (zero for an
// entry written by an older herd, which reads the entries of a newer one
// as before). Changes reads with a
// small script (the version check) and one XREAD, which at the end of the
// log blocks for at most 5 minutes, on a connection of its own that a call
// given up unblocks (CLIENT UNBLOCK; on a Redis Cluster, through the pool
// of the node serving the log's slot); 2 minutes for a user that may not
// run CLIENT ID and CLIENT UNBLOCK (logwait.go).
// The stream is under the group's hash tag like every other key, so Redis
// Cluster keeps a group on one slot, and DeleteGroup deletes it.
//
// The keys have no TTL. Run Redis with maxmemory-policy noeviction (or a
// volatile-* policy, which never picks these keys): an allkeys-* policy
// could evict ownership records, which is a data loss (see below).
//
// # Epochs never repeat, even when Redis loses its data
//
// A Claim assigns epoch = max(previous+1, server time in µs), the rule of
// store.NextEpoch, computed inside the claim script. If Redis loses the
// group's records (a restart without persistence, FLUSHALL, a failover to
// a replica that had not received the latest writes), "previous" is gone
// and the next epoch is simply the server's time in µs. That time is later
// than every epoch handed out before the loss: an epoch is never more than
// its claim's server time, except when one partition is claimed more than
// once per microsecond, which pushes previous+1 at most a few µs ahead of
// the clock; and a restart or failover takes far longer than that. So
// epochs keep increasing across the loss, and a stale owner's fenced
// writes (and any writes the user fences with the epoch in other systems)
// keep being rejected. The assumption is only that the server clock does
// not jump backwards by more than the time between the last claim and the
// loss (after a failover, the new primary's clock must agree with the old
// one's to within that time, which NTP-synchronised hosts do).
//
// Lua numbers are doubles; µs since 1970 (about 1.8e15) are exact up to
// 2^53 (the year 2255), which covers session expiry scores. Epochs are
// never converted to numbers at all: the scripts keep them as canonical
// decimal strings, compare them by length then bytes, and add one digit
// by digit, so every uint64 epoch round-trips exactly.
//
// Session ids are 130 random bits from crypto/rand (in base32), not a
// counter in Redis, so they too stay unique when Redis loses its data.
// After such a loss every session is unknown: KeepAlive returns
// store.ErrSessionExpired and the member opens a new session. Checkpoints
// stored only in Redis are lost with it.
package redisstore
