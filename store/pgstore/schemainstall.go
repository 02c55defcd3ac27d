package pgstore

// Installing and upgrading the schema, once per database.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"github.com/herdhq/herd/store"
	"github.com/jackc/pgx/v5/pgconn"
)

// sqlFor returns the schema's SQL with the store's schema name and channel.
func (s *Store) sqlFor(text string) string {
	text = strings.ReplaceAll(text, "{{SETPARTITIONS}}", setPartitionsSQL)
	text = strings.ReplaceAll(text, "{{FINISH}}", finishSQL)
	return strings.NewReplacer("{{S}}", s.qschema, "{{LOCKSREV}}", strconv.Itoa(locksRevision), "{{CHAN}}", quoteLiteral(s.channel), "{{APP}}", quoteLiteral(intxAppPrefix)).Replace(text)
}

// quoteIdent quotes a validated schema name (lower-case letters, digits
// and underscores only).
func quoteIdent(name string) string { return `"` + name + `"` }

// quoteLiteral quotes a string without quotes or backslashes (a channel
// name made of a validated schema name).
func quoteLiteral(v string) string { return `'` + v + `'` }

// ensureSchema creates the schema, its version table, tables and functions
// if they are missing, and refuses a schema of a later version. It runs in
// one transaction that locks the version table, so concurrent stores
// install it once; a store that raced another's CREATE SCHEMA retries.
// p and perr are start's probe of the schema.
func (s *Store) ensureSchema(ctx context.Context, p probe, perr error) error {
	// Most opens find the schema installed: a read tells, without the
	// lock, which would make stores opening together wait for each other
	// (ten members joining at once took a quarter of a second longer).
	if ok, err := s.installedAlready(p, perr); ok || err != nil {
		return err
	}
	if s.cfg.readOnly {
		return fmt.Errorf("pgstore: schema %q holds no herd tables of version %d: nothing was written to this store yet (or an older herd wrote it: open it once without read-only to upgrade it): %w",
			s.schema, SchemaVersion, fs.ErrNotExist)
	}
	var err error
	for range 5 {
		var installed bool
		installed, err = s.installOnce(ctx)
		if err == nil && installed {
			s.warmIdle(ctx)
		}
		var pe *pgconn.PgError
		if err == nil || !errors.As(err, &pe) {
			return err
		}
		switch pe.Code {
		case "23505", "42P06", "42P07", "42710", "40001", "40P01":
			continue // another store created it at the same time
		}
		return err
	}
	return err
}

// probe is what start reads in one statement: the server's version and
// role, and the state of the schema.
type probe struct {
	server  int  // server_version_num
	standby bool // pg_is_in_recovery
	version *int // the schema's version (NULL: none recorded)
	// hasAt: the log's time (logTimeSQL) and the loads (loadsSQL), added
	// to version 2 without a new version.
	hasAt    bool
	locksNow bool // the functions of locks.go are of this revision or later
}

// probe reads the server's version and role and the schema's state in one
// statement; it fails (42P01, 3F000) where the schema or its version
// table is missing.
func (s *Store) probe(ctx context.Context) (probe, error) {
	var p probe
	args := append(s.oneTrip(), s.qschema+".log", s.qschema+".loads", s.qschema+claimBatchSignature, locksRevision)
	err := s.pool.QueryRow(ctx, "SELECT current_setting('server_version_num')::int, pg_is_in_recovery(), "+
		"max(version), EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass($1) "+
		"AND attname = 'at' AND NOT attisdropped) AND to_regclass($2) IS NOT NULL, "+locksRevisionOf("$3")+" >= $4 FROM "+s.qschema+".schema_version",
		args...).Scan(&p.server, &p.standby, &p.version, &p.hasAt, &p.locksNow)
	return p, err
}

// installedAlready reports whether the probe found this version's tables
// (a newer version is ErrInvalid, as in installOnce); false, with no error,
// when the schema or its version table is missing, or at an older version
// that installOnce is to judge. A read-only store, which never calls them,
// takes the functions of locks.go of any revision.
func (s *Store) installedAlready(p probe, err error) (bool, error) {
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe) && (pe.Code == "42P01" || pe.Code == "3F000"): // undefined table or schema
		return false, nil
	case err != nil:
		return false, err
	case p.version != nil && *p.version > SchemaVersion:
		return false, newerSchema{schema: s.schema, version: *p.version}
	}
	return p.version != nil && *p.version == SchemaVersion && p.hasAt && (p.locksNow || s.cfg.readOnly), nil
}

// installOnce reports whether it created the schema's tables.
func (s *Store) installOnce(ctx context.Context) (bool, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	for _, q := range []string{
		"CREATE SCHEMA IF NOT EXISTS " + s.qschema,
		"CREATE TABLE IF NOT EXISTS " + s.qschema + ".schema_version (version integer NOT NULL, installed timestamptz NOT NULL DEFAULT now())",
		"LOCK TABLE " + s.qschema + ".schema_version IN EXCLUSIVE MODE",
	} {
		if _, err := tx.Exec(ctx, q); err != nil {
			return false, err
		}
	}
	var v *int // max over no rows is NULL: nothing installed yet
	if err := tx.QueryRow(ctx, "SELECT max(version) FROM "+s.qschema+".schema_version").Scan(&v); err != nil {
		return false, err
	}
	version := 0
	if v != nil {
		version = *v
	}
	switch {
	case version > SchemaVersion:
		return false, newerSchema{schema: s.schema, version: version}
	case version == SchemaVersion:
		// Installed; the log's time is added if it predates it (a no-op
		// otherwise: another store added it meanwhile), and the functions
		// of locks.go are replaced if they are of an older revision (same
		// arguments, results and checks: members running the older ones
		// keep working beside them).
		text := logTimeSQL + loadsSQL
		var rev int
		if err := tx.QueryRow(ctx, "SELECT "+locksRevisionOf("$1"), s.qschema+claimBatchSignature).Scan(&rev); err != nil {
			return false, err
		}
		if rev < locksRevision {
			text += locksSQL
		}
		if _, err := tx.Exec(ctx, s.sqlFor(text)); err != nil {
			return false, fmt.Errorf("adding the log's time and the table of loads, replacing the functions of locks: %w", err)
		}
		return false, tx.Commit(ctx)
	case version == 1:
		// The groups gain their kind and digest (upgradeV1SQL), and the
		// functions of locks.go replace their older versions (same
		// arguments and results: members of version 1 still running keep
		// working with them).
		if _, err := tx.Exec(ctx, s.sqlFor(upgradeV1SQL+locksSQL+logTimeSQL+loadsSQL)); err != nil {
			return false, fmt.Errorf("upgrading the schema from version 1: %w", err)
		}
	case version != 0:
		return false, fmt.Errorf("pgstore: schema %q is at version %d, which this herd cannot upgrade (it writes version %d): %w",
			s.schema, version, SchemaVersion, store.ErrInvalid)
	default:
		if _, err := tx.Exec(ctx, s.sqlFor(schemaSQL+locksSQL+loadsSQL)); err != nil {
			return false, fmt.Errorf("creating the tables: %w", err)
		}
	}
	if _, err := tx.Exec(ctx, "INSERT INTO "+s.qschema+".schema_version (version) VALUES ($1)", SchemaVersion); err != nil {
		return false, err
	}
	return true, tx.Commit(ctx)
}

// newerSchema is ensureSchema's refusal of a schema written by a newer herd.
type newerSchema struct {
	schema  string
	version int
}

func (e newerSchema) Error() string {
	return fmt.Sprintf("pgstore: schema %q is at version %d, written by a newer herd; this one knows version %d and could misread it: "+
		"upgrade this program, or give it a schema of its own (?schema=name)", e.schema, e.version, SchemaVersion)
}

func (e newerSchema) Unwrap() error { return store.ErrInvalid }
