package sqlitestore

// The statements of every call, prepared once per Store at Open (see
// stmt.go). DeleteGroup's, rare, are not among them.
const (
	qGroup            = `SELECT id, tag, seq, partset, kind, digest FROM herd_groups WHERE name = ?`
	qCreateGroup      = `INSERT INTO herd_groups (name, tag, seq, partset) VALUES (?, ?, 0, 0) RETURNING id`
	qDueSessions      = `SELECT id FROM herd_sessions WHERE gid = ? AND expires <= ? ORDER BY id`
	qDeleteDue        = `DELETE FROM herd_sessions WHERE gid = ? AND expires <= ?`
	qMoveGroup        = `UPDATE herd_groups SET tag = ?, seq = ? WHERE id = ?`
	qTrimLog          = `DELETE FROM herd_log WHERE gid = ? AND seq < ?`
	qAlive            = `SELECT member FROM herd_sessions WHERE gid = ? AND id = ? AND expires > ?`
	qNextExpiry       = `SELECT min(min(expires - ?, ttl)) FROM herd_sessions WHERE gid = ? AND expires > ?`
	qEpochFloor       = `SELECT value FROM herd_meta WHERE key = 'epoch_floor'`
	qRecord           = `SELECT session, member, epoch, given_back FROM herd_owners WHERE gid = ? AND partition = ?`
	qClaimRead        = `SELECT o.partition IS NOT NULL, coalesce(o.session, ''), coalesce(o.member, ''), coalesce(o.epoch, 0), coalesce(o.given_back, ''), c.partition IS NOT NULL, c.value FROM (SELECT ? AS gid, ? AS partition) k LEFT JOIN herd_owners o ON o.gid = k.gid AND o.partition = k.partition LEFT JOIN herd_checkpoints c ON c.gid = k.gid AND c.partition = k.partition`
	qRelease          = `UPDATE herd_owners SET session = '', member = '', given_back = ? WHERE gid = ? AND partition = ?`
	qDeleteCheckpoint = `DELETE FROM herd_checkpoints WHERE gid = ? AND partition = ?`
	qRestoreOwner     = `UPDATE herd_owners SET epoch = ?, claimed_at = ? WHERE gid = ? AND partition = ?`
	qInsertSession    = `INSERT INTO herd_sessions (gid, id, member, weight, expires, ttl) VALUES (?, ?, ?, ?, ?, ?)`
	qRenew            = `UPDATE herd_sessions SET expires = ?, ttl = ? WHERE gid = ? AND id = ? AND expires > ?`
	qDeleteSession    = `DELETE FROM herd_sessions WHERE gid = ? AND id = ?`
	qDeletePartitions = `DELETE FROM herd_partitions WHERE gid = ?`
	qInsertPartition  = `INSERT INTO herd_partitions (gid, id, weight) VALUES (?, ?, ?)`
	qSetPartset       = `UPDATE herd_groups SET partset = 1, digest = ? WHERE id = ?`
	qSetKind          = `UPDATE herd_groups SET kind = ? WHERE id = ?`
	qSnapSessions     = `SELECT id, member, weight, expires, ttl FROM herd_sessions WHERE gid = ? ORDER BY id`
	qSnapPartitions   = `SELECT id, weight FROM herd_partitions WHERE gid = ? ORDER BY id`
	qSnapOwners       = `SELECT partition, session, member, epoch, given_back FROM herd_owners WHERE gid = ? ORDER BY partition`
	qSessionIDs       = `SELECT id FROM herd_sessions WHERE gid = ?`
	qClaimOwner       = `INSERT INTO herd_owners (gid, partition, session, member, epoch, given_back, claimed_at) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (gid, partition) DO UPDATE SET session = excluded.session, member = excluded.member, epoch = excluded.epoch, given_back = excluded.given_back, claimed_at = excluded.claimed_at`
	qSetCheckpoint    = `INSERT INTO herd_checkpoints (gid, partition, value, written_at) VALUES (?, ?, ?, ?) ON CONFLICT (gid, partition) DO UPDATE SET value = excluded.value, written_at = excluded.written_at`
	qInsertRestored   = `INSERT INTO herd_owners (gid, partition, session, member, epoch, given_back, claimed_at) VALUES (?, ?, '', '', ?, '', ?)`
	qLogEntries       = `SELECT seq, tag, kind, session, member, weight, partition, epoch, given_back, partitions, at FROM herd_log WHERE gid = ? AND seq >= ? ORDER BY seq LIMIT ?`
	qRecordFull       = `SELECT o.session, o.member, o.epoch, o.given_back, o.claimed_at, c.value, c.written_at FROM herd_owners o LEFT JOIN herd_checkpoints c ON c.gid = o.gid AND c.partition = o.partition WHERE o.gid = ? AND o.partition = ?`
	qInsertEntry      = `INSERT INTO herd_log (gid, seq, tag, kind, session, member, weight, partition, epoch, given_back, partitions, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
)

// queries lists the statements Open prepares.
var queries = []string{
	qGroup,
	qCreateGroup,
	qDueSessions,
	qDeleteDue,
	qMoveGroup,
	qTrimLog,
	qAlive,
	qNextExpiry,
	qEpochFloor,
	qRecord,
	qClaimRead,
	qRelease,
	qDeleteCheckpoint,
	qRestoreOwner,
	qInsertSession,
	qRenew,
	qDeleteSession,
	qDeletePartitions,
	qInsertPartition,
	qSetPartset,
	qSetKind,
	qSnapSessions,
	qSnapPartitions,
	qSnapOwners,
	qSessionIDs,
	qClaimOwner,
	qSetCheckpoint,
	qInsertRestored,
	qLogEntries,
	qRecordFull,
	qInsertEntry,
}
