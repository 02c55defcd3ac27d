package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// A herd database is recognised by its header: PRAGMA application_id holds
// applicationID (the bytes "herd"), PRAGMA user_version the version of the
// schema below. Both live in the file's first page, so `file herd.db` and
// `sqlite3 herd.db 'PRAGMA user_version'` show them.
const (
	applicationID = 0x68657264 // "herd"
	// SchemaVersion is the version of the tables this package creates and
	// reads. A database with a higher version was written by a newer herd:
	// Open refuses it rather than misread it.
	SchemaVersion = 1
)

// The tables. Every table but herd_groups is keyed by the group's row id
// (gid), so a group id of up to 512 bytes is stored once. Every table is
// STRICT, so a value of the wrong type cannot be written even by hand.
// Epochs and tags are uint64 stored bit for bit in an INTEGER (an epoch of
// 2^63 or more reads as negative in SQL; the Go code compares them as
// uint64). Times are µs since 1970 on the host's wall clock.
var schemaV1 = []string{
	// key 'epoch_floor': the highest epoch of any group deleted from this
	// file, so a group written again never repeats an epoch (see doc.go).
	`CREATE TABLE herd_meta (
		key   TEXT PRIMARY KEY,
		value INTEGER NOT NULL
	) STRICT, WITHOUT ROWID`,
	// One row per group that holds anything. tag and seq are those of the
	// last log entry (seq 0: none yet, tag the history's random start).
	// kind and digest: the group's kind and the digest of its partition
	// set (see kind.go), added to files of herd before them by Open.
	`CREATE TABLE herd_groups (
		id      INTEGER PRIMARY KEY AUTOINCREMENT,
		name    TEXT NOT NULL UNIQUE,
		tag     INTEGER NOT NULL,
		seq     INTEGER NOT NULL,
		partset INTEGER NOT NULL,
		kind    TEXT NOT NULL DEFAULT '',
		digest  TEXT NOT NULL DEFAULT ''
	) STRICT`,
	// Live sessions; expires is the wall-clock deadline, ttl the TTL of
	// the last renewal (Remaining is never shown above it).
	`CREATE TABLE herd_sessions (
		gid     INTEGER NOT NULL,
		id      TEXT NOT NULL,
		member  TEXT NOT NULL,
		weight  INTEGER NOT NULL,
		expires INTEGER NOT NULL,
		ttl     INTEGER NOT NULL,
		PRIMARY KEY (gid, id)
	) STRICT, WITHOUT ROWID`,
	`CREATE INDEX herd_sessions_expiry ON herd_sessions (gid, expires)`,
	`CREATE TABLE herd_partitions (
		gid    INTEGER NOT NULL,
		id     TEXT NOT NULL,
		weight INTEGER NOT NULL,
		PRIMARY KEY (gid, id)
	) STRICT, WITHOUT ROWID`,
	// Ownership records without their checkpoints, so that a snapshot
	// scans small rows. claimed_at: when the record got its epoch.
	`CREATE TABLE herd_owners (
		gid        INTEGER NOT NULL,
		partition  TEXT NOT NULL,
		session    TEXT NOT NULL,
		member     TEXT NOT NULL,
		epoch      INTEGER NOT NULL,
		given_back TEXT NOT NULL,
		claimed_at INTEGER,
		PRIMARY KEY (gid, partition)
	) STRICT, WITHOUT ROWID`,
	// Checkpoints (up to 1 MiB each) in a rowid table of their own.
	`CREATE TABLE herd_checkpoints (
		gid        INTEGER NOT NULL,
		partition  TEXT NOT NULL,
		value      BLOB NOT NULL,
		written_at INTEGER NOT NULL,
		PRIMARY KEY (gid, partition)
	) STRICT`,
	// The group's log (see log.go). at: when the entry was appended (the
	// writing transaction's clock), 0 for an entry of a herd before it.
	`CREATE TABLE herd_log (
		gid        INTEGER NOT NULL,
		seq        INTEGER NOT NULL,
		tag        INTEGER NOT NULL,
		kind       INTEGER NOT NULL,
		session    TEXT NOT NULL,
		member     TEXT NOT NULL,
		weight     INTEGER NOT NULL,
		partition  TEXT NOT NULL,
		epoch      INTEGER NOT NULL,
		given_back TEXT NOT NULL,
		partitions TEXT,
		at         INTEGER NOT NULL DEFAULT 0,
		PRIMARY KEY (gid, seq)
	) STRICT, WITHOUT ROWID`,
	// The latest load of each partition (loads.go).
	createLoads,
	// Sessions tied to a lock file (tie.go).
	createTies,
}

// herdTables are the tables a herd database of this version must have.
var herdTables = []string{"herd_checkpoints", "herd_groups", "herd_log", "herd_meta", "herd_owners", "herd_partitions", "herd_sessions"}

// header is what a database's first page says about it.
type header struct {
	appID, version int64
	tables         []string // every table, sorted (sqlite_% ones left out)
}

func readHeader(ctx context.Context, q querier) (header, error) {
	var h header
	if err := q.QueryRowContext(ctx, "PRAGMA application_id").Scan(&h.appID); err != nil {
		return h, err
	}
	if err := q.QueryRowContext(ctx, "PRAGMA user_version").Scan(&h.version); err != nil {
		return h, err
	}
	rows, err := q.QueryContext(ctx, "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite%' ORDER BY name")
	if err != nil {
		return h, err
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return h, err
		}
		h.tables = append(h.tables, name)
	}
	return h, rows.Err()
}

// errNotHerd is returned (wrapped) for a file that is not a herd database.
var errNotHerd = errors.New("not a herd database")

// check says whether h is a herd database this version can use: ok, or
// empty (a new file: create the schema), or an error saying what it is.
func (h header) check(path string) (empty bool, err error) {
	switch {
	case h.appID == 0 && h.version == 0 && len(h.tables) == 0:
		return true, nil
	case h.appID == 0 && len(h.tables) > 0:
		return false, fmt.Errorf("%s is an SQLite database of another application (it has the tables %s and no herd schema): %w; "+
			"give herd a file of its own", path, listTables(h.tables), errNotHerd)
	case h.appID != applicationID && len(h.tables) > 0:
		return false, fmt.Errorf("%s is an SQLite database of another application (application_id %#x, tables %s): %w; "+
			"give herd a file of its own", path, h.appID, listTables(h.tables), errNotHerd)
	case h.appID != applicationID:
		return false, fmt.Errorf("%s is an SQLite database of another application (application_id %#x, user_version %d): %w; "+
			"give herd a file of its own", path, h.appID, h.version, errNotHerd)
	case h.version > SchemaVersion:
		return false, fmt.Errorf("%s has herd schema version %d, newer than this herd's %d: it was written by a newer "+
			"herd; upgrade this one (downgrading a database is not supported): %w", path, h.version, SchemaVersion, errNewerSchema)
	case h.version < 1:
		return false, fmt.Errorf("%s is marked as a herd database but has schema version %d: %w", path, h.version, errNotHerd)
	}
	var missing []string
	for _, t := range herdTables {
		if !slices.Contains(h.tables, t) {
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		return false, fmt.Errorf("%s is a herd database (schema version %d) missing the tables %s: it was damaged "+
			"or edited by hand: %w", path, h.version, strings.Join(missing, ", "), errNotHerd)
	}
	return false, nil
}

// errNewerSchema is returned (wrapped) for a database of a newer herd.
var errNewerSchema = errors.New("herd schema version is newer than this program's")

func listTables(ts []string) string {
	if len(ts) > 5 {
		return fmt.Sprintf("%s and %d more", strings.Join(ts[:5], ", "), len(ts)-5)
	}
	return strings.Join(ts, ", ")
}

// initSchema checks the database and creates the schema if the file is
// new, in one write transaction: two processes opening a new file at once
// create it once.
func initSchema(ctx context.Context, db *sql.DB, path string) error {
	// A read first, in one read transaction (the header and the tables of
	// one moment): an existing herd database (the common case) needs no
	// write lock to open.
	rtx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	h, err := readHeader(ctx, rtx)
	rtx.Rollback()
	if err != nil {
		return err
	}
	empty, err := h.check(path)
	if err != nil {
		return err
	}
	if !empty {
		if err := addKindColumns(ctx, db); err != nil {
			return err
		}
		if err := addLoadsTable(ctx, db); err != nil {
			return err
		}
		if err := addTiesTable(ctx, db); err != nil {
			return err
		}
		return addColumns(ctx, db, "herd_log", "the entries' time", []string{"at"}, []string{
			`ALTER TABLE herd_log ADD COLUMN at INTEGER NOT NULL DEFAULT 0`,
		})
	}
	tx, err := db.BeginTx(ctx, nil) // BEGIN IMMEDIATE (see dsn)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if h, err = readHeader(ctx, tx); err != nil {
		return err
	}
	if empty, err = h.check(path); err != nil || !empty {
		return err // created meanwhile by another process
	}
	for _, stmt := range schemaV1 {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("creating the schema: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA application_id = %d", applicationID)); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", SchemaVersion)); err != nil {
		return err
	}
	return tx.Commit()
}

// addColumns adds to table the columns cols (the statements alters add
// them) in a file written by a herd before them, unless it has them; what
// names them in an error. Such columns are added without a new
// SchemaVersion: they have defaults and every statement names its
// columns, so a herd before them goes on using the file (it neither reads
// nor writes them; what it writes gets the default). Two processes
// opening the file at once add them once: the check is repeated in the
// write transaction.
func addColumns(ctx context.Context, db *sql.DB, table, what string, cols, alters []string) error {
	has := func(q querier) (bool, error) {
		var n int
		args := []any{table}
		for _, c := range cols {
			args = append(args, c)
		}
		err := q.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info(?) WHERE name IN (?`+
			strings.Repeat(", ?", len(cols)-1)+`)`, args...).Scan(&n)
		return n == len(cols), err
	}
	if ok, err := has(db); ok || err != nil {
		return err
	}
	tx, err := db.BeginTx(ctx, nil) // BEGIN IMMEDIATE (see dsn)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if ok, err := has(tx); ok || err != nil {
		return err // added meanwhile by another process
	}
	for _, q := range alters {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("adding %s to %s: %w", what, table, err)
		}
	}
	return tx.Commit()
}

// querier is what *sql.DB, *sql.Conn and *sql.Tx have in common.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}
