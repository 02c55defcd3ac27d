package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
)

// createTies is herd_ties, the sessions tied to a lock file (tie.go): one
// row per tie, with the lock file's identity (device and inode, so that a
// file removed or replaced is never taken for the tied one), the grace,
// and when its lock was first seen free (cut, µs; NULL while held). It is
// created with the schema in a new file and by Open in a file of a herd
// before it (addTiesTable), without a new SchemaVersion: a herd before it
// neither reads nor writes it.
const createTies = `CREATE TABLE IF NOT EXISTS herd_ties (
		gid   INTEGER NOT NULL,
		id    TEXT NOT NULL,
		dev   INTEGER NOT NULL,
		ino   INTEGER NOT NULL,
		grace INTEGER NOT NULL,
		cut   INTEGER,
		PRIMARY KEY (gid, id)
	) STRICT, WITHOUT ROWID`

// The statements of ties. Those run on every change of the file are
// prepared (tieQueries): every tie reads its ring (qRing) at every commit
// that wakes it, 16 ties x 16 claim batches in a first placement of 16
// member processes, and parsing qRing was two thirds of the cost of that
// read (BenchmarkTieRing: 178-229 µs unprepared, 79-96 prepared).
const (
	qTies         = `SELECT id, dev, ino, cut FROM herd_ties WHERE gid = ?`
	qInsertTie    = `INSERT INTO herd_ties (gid, id, dev, ino, grace) VALUES (?, ?, ?, ?, ?)`
	qForgetTies   = `DELETE FROM herd_ties WHERE gid = ? AND id NOT IN (SELECT id FROM herd_sessions WHERE gid = ?) RETURNING id, dev, ino`
	qCutTie       = `UPDATE herd_ties SET cut = ? WHERE gid = ? AND id = ? AND cut IS NULL`
	qCapCutTies   = `UPDATE herd_sessions SET expires = (SELECT t.cut + t.grace FROM herd_ties t WHERE t.gid = herd_sessions.gid AND t.id = herd_sessions.id) WHERE gid = ? AND expires > (SELECT t.cut + t.grace FROM herd_ties t WHERE t.gid = herd_sessions.gid AND t.id = herd_sessions.id AND t.cut IS NOT NULL)`
	qNextCut      = `SELECT min(t.cut + t.grace) FROM herd_ties t JOIN herd_sessions s ON s.gid = t.gid AND s.id = t.id WHERE t.gid = ? AND t.cut IS NOT NULL`
	qRing         = `SELECT t.id, t.dev, t.ino, t.cut FROM herd_ties t JOIN herd_groups g ON g.id = t.gid JOIN herd_sessions s ON s.gid = t.gid AND s.id = t.id WHERE g.name = ? ORDER BY t.id`
	qHasTieTable  = `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'herd_ties'`
	qGroupHasTies = `SELECT EXISTS (SELECT 1 FROM herd_ties WHERE gid = ?)`
)

// tieQueries are the statements of ties prepared at Open (a file opened
// for writing: it has herd_ties).
var tieQueries = []string{qRing, qGroupHasTies, qTies}

// addTiesTable creates herd_ties in a file written by a herd before it.
func addTiesTable(ctx context.Context, db *sql.DB) error {
	var n int
	if err := db.QueryRowContext(ctx, qHasTieTable).Scan(&n); err != nil || n > 0 {
		return err
	}
	if _, err := db.ExecContext(ctx, createTies); err != nil {
		return fmt.Errorf("adding the table of session ties: %w", err)
	}
	return nil
}
