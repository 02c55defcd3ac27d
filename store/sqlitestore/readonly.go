package sqlitestore

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/herdhq/herd/store"
)

// WithReadOnly opens the database for reading only, for tools that
// inspect a group (herd status): Open creates nothing (no file, no schema,
// no sidecar) and never writes the database, so a user who may only read
// the file can inspect it. A file that does not exist is an error that
// wraps fs.ErrNotExist.
//
// Two cases, told apart by the file <file>-wal:
//   - it exists: processes have the database open (or one stopped without
//     closing it). The file is opened read-only (SQLite's mode=ro) and
//     read through the -wal and -shm files as every reader does; SQLite
//     may create a missing -shm. The Store sees every later commit.
//   - it does not: no process has the database open and every commit is in
//     the file. It is opened as immutable (SQLite's immutable=1), which
//     takes no lock and creates no -wal or -shm, and the Store reads the
//     file as it was at Open: open a new Store to see a later change.
//
// Every call that would write fails with store.ErrUnavailable.
func WithReadOnly() Option {
	return func(c *config) { c.readOnly = true }
}

// openReadOnly opens the file the path names for a Store opened with
// WithReadOnly: no sidecar, nothing created.
func openReadOnly(ctx context.Context, path string, allowNetwork bool, cfg config) (*dbFile, error) {
	if err := checkReadable(path, allowNetwork); err != nil {
		return nil, err
	}
	before, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: opening %s: %w: %w", path, store.ErrUnavailable, err)
	}
	db, err := openCheckedReadOnly(ctx, path, cfg.busyTimeout)
	if err != nil {
		return nil, err
	}
	f := &dbFile{db: db, stmts: map[string]*sql.Stmt{}, info: before}
	if err := f.prepare(ctx, queries); err != nil {
		_ = f.closeDB()
		return nil, fail("preparing statements on "+path, err)
	}
	return f, nil
}

// openCheckedReadOnly opens the database read-only and checks that it
// holds herd's schema. An immutable open reads the file without a lock, so
// it can see a file that a first member is creating at that moment (its
// schema half written, in rollback-journal mode before it switches to
// WAL): a check that fails that way is tried again, with a lock-taking
// open once a -wal or -journal file shows a writer, until the busy timeout.
func openCheckedReadOnly(ctx context.Context, path string, busy time.Duration) (*sql.DB, error) {
	deadline := time.Now().Add(busy)
	pause := 10 * time.Millisecond
	for {
		_, err := os.Stat(path + "-wal")
		immutable := errors.Is(err, fs.ErrNotExist)
		if _, err := os.Stat(path + "-journal"); err == nil {
			immutable = false
		}
		db, err := sql.Open("sqlite", readOnlyDSN(path, busy, immutable))
		if err != nil {
			return nil, fmt.Errorf("sqlitestore: opening %s: %w: %w", path, store.ErrUnavailable, err)
		}
		db.SetMaxOpenConns(maxConns)
		db.SetMaxIdleConns(maxConns)
		err = checkHerdReadOnly(ctx, db, path)
		if err == nil {
			return db, nil
		}
		_ = db.Close()
		// A lock-taking open can also catch a first member's creation
		// (seen under load: tables and no herd header, 0.2 s after the
		// file appeared): a file that is not herd's yet is looked at again.
		if (!immutable && !errors.Is(err, errNotHerd)) || time.Now().Add(pause).After(deadline) {
			return nil, err
		}
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return nil, err
		}
		pause = min(2*pause, 200*time.Millisecond)
	}
}

// checkReadable checks, without creating or writing anything, that path is
// a file that can be read and begins as an SQLite database.
func checkReadable(path string, allowNetwork bool) error {
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("sqlitestore: %s does not exist (opened read-only, so it was not created): check the path: %w: %w",
			path, fs.ErrNotExist, store.ErrUnavailable)
	case err != nil:
		return fmt.Errorf("sqlitestore: cannot use %s: %w: %w", path, unwrapPath(err), store.ErrUnavailable)
	case st.IsDir():
		return fmt.Errorf("sqlitestore: %s is a directory; give the path of a database file in it: %w", path, store.ErrUnavailable)
	}
	if err := checkFileSystem(filepath.Dir(path), allowNetwork); err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("sqlitestore: cannot read %s: %w: %w", path, unwrapPath(err), store.ErrUnavailable)
	}
	defer f.Close()
	head := make([]byte, len(sqliteMagic))
	n, err := io.ReadFull(f, head)
	switch {
	case n == 0 && (err == io.EOF || err == nil):
		return fmt.Errorf("sqlitestore: %s is empty: no herd member has used it yet: %w: %w", path, fs.ErrNotExist, store.ErrUnavailable)
	case err != nil && err != io.ErrUnexpectedEOF:
		return fmt.Errorf("sqlitestore: reading %s: %w: %w", path, err, store.ErrUnavailable)
	case !bytes.Equal(head[:n], sqliteMagic):
		return fmt.Errorf("sqlitestore: %s is not an SQLite database (it begins with %q): %w: %w", path, head[:n], errNotHerd, store.ErrCorrupt)
	}
	return nil
}

// checkHerdReadOnly checks that the database holds herd's schema.
func checkHerdReadOnly(ctx context.Context, db *sql.DB, path string) error {
	h, err := readHeader(ctx, db)
	if err != nil {
		return openErr(path, err)
	}
	empty, err := h.check(path)
	switch {
	case errors.Is(err, errNotHerd) || errors.Is(err, errNewerSchema):
		return fmt.Errorf("sqlitestore: %w: %w", err, store.ErrCorrupt)
	case err != nil:
		return openErr(path, err)
	case empty:
		return fmt.Errorf("sqlitestore: %s holds no herd schema: no herd member has used it yet: %w: %w", path, fs.ErrNotExist, store.ErrUnavailable)
	}
	return nil
}

// readOnlyDSN is dsn for a read-only Store: mode=ro, or immutable=1 when
// no process has the file open (see WithReadOnly); query_only refuses
// writes on the connection itself.
func readOnlyDSN(path string, busy time.Duration, immutable bool) string {
	u := url.URL{Scheme: "file", Path: path}
	q := []string{
		"mode=ro",
		fmt.Sprintf("_pragma=busy_timeout(%d)", busy.Milliseconds()),
		"_pragma=query_only(1)",
	}
	if immutable {
		q = append(q, "immutable=1")
	}
	return "file:" + u.EscapedPath() + "?" + strings.Join(q, "&")
}
