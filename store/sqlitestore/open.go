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

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver

	"github.com/herdhq/herd/store"
)

// Option configures a Store.
type Option func(*config)

type config struct {
	logLimit     int
	now          func() time.Time
	busyTimeout  time.Duration
	pollInterval time.Duration // the backstop poll of data_version
	noInotify    bool          // tests and measurements: poll only
	readOnly     bool          // WithReadOnly
}

// WithLogLimit sets how many entries of each group's log the store keeps
// (default DefaultLogLimit); a reader further behind gets
// store.ErrVersionGone and reads a new snapshot. n < 1 is read as 1.
func WithLogLimit(n int) Option {
	return func(c *config) { c.logLimit = max(n, 1) }
}

// WithClock sets the store's clock (default time.Now, the host's wall
// clock). Every process sharing a file must use the same clock: this is
// for tests of clock steps.
func WithClock(now func() time.Time) Option {
	return func(c *config) { c.now = now }
}

// WithBusyTimeout sets how long a write waits for another process's write
// transaction to end before it fails with store.ErrUnavailable (default
// 5s; a call's context ends the wait earlier).
func WithBusyTimeout(d time.Duration) Option {
	return func(c *config) { c.busyTimeout = max(d, time.Millisecond) }
}

const (
	// DefaultLogLimit is how many entries of a group's log are kept by
	// default: a whole first placement of 100,000 partitions.
	DefaultLogLimit     = 100_000
	defaultBusyTimeout  = 5 * time.Second
	defaultPollInterval = time.Second
	// maxConns bounds the connections of one Store: readers (Snapshot,
	// Changes, Records) run in parallel, writes one at a time.
	maxConns = 6
)

// sqliteMagic begins every SQLite 3 database file.
var sqliteMagic = []byte("SQLite format 3\x00")

// Open opens (creating it if needed) the herd database at the path of
// rawURL and returns a Store on it.
//
//	sqlite:///var/lib/herd/herd.db     absolute path
//	sqlite://herd.db                   relative to the working directory at Open
//	sqlite://data/herd.db?network_fs=allow
//
// Everything after "sqlite://" up to a '?' is the path, percent-decoded
// (write %3F for a '?' in a file name). The only query parameter is
// network_fs=allow, which lets Open use a file on a network file system
// (refused by default, see the package documentation).
//
// Open checks the file before SQLite touches it and says what is wrong:
// a directory that does not exist or cannot be written, a read-only file, a
// file that is not an SQLite database, an SQLite database of another
// application (one with tables of its own), a herd database of a newer
// schema version, a network file system. A new or empty file gets the
// schema. Errors wrap store.ErrInvalid (the URL, a network file system),
// store.ErrCorrupt (not a herd database, or a newer one) or
// store.ErrUnavailable (the file cannot be created, opened or written).
func Open(ctx context.Context, rawURL string, opts ...Option) (*Store, error) {
	if ctx == nil { // it would panic below
		return nil, fmt.Errorf("sqlitestore: open: nil context (pass context.Background() or a call's own): %w", store.ErrInvalid)
	}
	path, allowNetwork, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	cfg := config{logLimit: DefaultLogLimit, now: time.Now, busyTimeout: defaultBusyTimeout, pollInterval: defaultPollInterval}
	for _, o := range opts {
		o(&cfg)
	}
	f, err := openAny(ctx, path, allowNetwork, cfg)
	if err != nil {
		return nil, err
	}
	s := newStore(f, path, allowNetwork, cfg)
	s.notify.start()
	return s, nil
}

// openDB opens the database and sets it up. SQLite does not wait for the
// busy timeout in every case of contention: a connection switching a new
// file to WAL while another process does the same can get SQLITE_BUSY at
// once. So a setup that fails that way is tried again, after a pause
// that grows, until ctx ends or the busy timeout has passed.
func openDB(ctx context.Context, path string, busy time.Duration) (*sql.DB, error) {
	deadline := time.Now().Add(busy)
	pause := 5 * time.Millisecond
	for {
		db, err := sql.Open("sqlite", dsn(path, busy))
		if err != nil {
			return nil, fmt.Errorf("sqlitestore: opening %s: %w: %w", path, store.ErrUnavailable, err)
		}
		db.SetMaxOpenConns(maxConns)
		db.SetMaxIdleConns(maxConns)
		err = setup(ctx, db, path)
		if err == nil {
			return db, nil
		}
		_ = db.Close()
		if code(err) != sqliteBusy || time.Now().Add(pause).After(deadline) {
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

// setup checks that the database is a herd database in WAL mode, creating
// the schema in a new file.
func setup(ctx context.Context, db *sql.DB, path string) error {
	var mode string
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return openErr(path, err)
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("sqlitestore: %s: SQLite would not switch the database to WAL mode (journal mode %q): "+
			"the file system may not support the shared memory WAL needs: %w", path, mode, store.ErrUnavailable)
	}
	if err := initSchema(ctx, db, path); err != nil {
		if errors.Is(err, errNotHerd) || errors.Is(err, errNewerSchema) {
			return fmt.Errorf("sqlitestore: %w: %w", err, store.ErrCorrupt)
		}
		return openErr(path, err)
	}
	return nil
}

// openErr describes an error of the first statements on a file.
func openErr(path string, err error) error {
	switch code(err) {
	case sqliteNotADB:
		return fmt.Errorf("sqlitestore: %s is not an SQLite database: give herd a file of its own or a new path: %w", path, store.ErrCorrupt)
	case sqliteReadOnly:
		return fmt.Errorf("sqlitestore: %s cannot be written (%v): herd writes on every claim and renewal; "+
			"make the file and its directory writable: %w", path, err, store.ErrUnavailable)
	case sqliteCantOpen:
		return fmt.Errorf("sqlitestore: cannot open %s (%v); SQLite also creates %s-wal and %s-shm next to it, so its "+
			"directory must be writable: %w", path, err, filepath.Base(path), filepath.Base(path), store.ErrUnavailable)
	}
	return fail("open "+path, err)
}

// dsn is the modernc.org/sqlite data source name of path: a file: URI
// (percent-encoded, so any file name works) and the settings of every
// connection: a busy timeout first, WAL, synchronous=FULL (a commit is on
// disk before it returns, so an epoch handed out survives a power loss),
// and BEGIN IMMEDIATE for every read-write transaction (_txlock), so that
// a write transaction takes the write lock before its first read and its
// checks cannot be overtaken by another process's write.
func dsn(path string, busy time.Duration) string {
	u := url.URL{Scheme: "file", Path: path}
	q := []string{
		fmt.Sprintf("_pragma=busy_timeout(%d)", busy.Milliseconds()),
		"_pragma=journal_mode(WAL)",
		"_pragma=synchronous(FULL)",
		"_pragma=journal_size_limit(67108864)",
		"_txlock=immediate",
	}
	return "file:" + u.EscapedPath() + "?" + strings.Join(q, "&")
}

// parseURL returns the absolute path of a sqlite:// URL and whether it
// allows a network file system.
func parseURL(raw string) (path string, allowNetwork bool, err error) {
	bad := func(format string, args ...any) (string, bool, error) {
		return "", false, fmt.Errorf("sqlitestore: URL %q: %s: %w", raw, fmt.Sprintf(format, args...), store.ErrInvalid)
	}
	scheme, rest, ok := strings.Cut(raw, ":")
	if !ok || !strings.EqualFold(scheme, "sqlite") {
		return bad("want sqlite://PATH")
	}
	if !strings.HasPrefix(rest, "//") {
		return bad("want sqlite://PATH (two slashes, then the path: sqlite://herd.db, sqlite:///abs/herd.db)")
	}
	rest = rest[2:]
	p, query, _ := strings.Cut(rest, "?")
	if i := strings.IndexByte(p, '#'); i >= 0 {
		return bad("a '#' in the path must be written %%23")
	}
	p, err = url.PathUnescape(p)
	if err != nil {
		return bad("the path is not validly percent-encoded (%v)", err)
	}
	switch {
	case p == "":
		return bad("no path; want sqlite://herd.db or sqlite:///abs/path/herd.db")
	case p == ":memory:" || strings.HasPrefix(p, "file:"):
		return bad("an in-memory or file: URI database is not shared between processes; use mem:// for one process, or a path")
	case p == "~" || strings.HasPrefix(p, "~/"):
		return bad("'~' is not expanded inside a URL; write the absolute path")
	case strings.ContainsRune(p, 0):
		return bad("the path contains a NUL byte")
	}
	if query != "" {
		vs, err := url.ParseQuery(query)
		if err != nil {
			return bad("malformed query (%v)", err)
		}
		for k, v := range vs {
			switch {
			case k == "network_fs" && len(v) == 1 && (v[0] == "allow" || v[0] == "refuse"):
				allowNetwork = v[0] == "allow"
			case k == "network_fs":
				return bad("network_fs must be allow or refuse")
			default:
				return bad("unknown parameter %q (the only one is network_fs=allow)", k)
			}
		}
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return bad("cannot make the path absolute (%v)", err)
	}
	return abs, allowNetwork, nil
}

// checkPath checks the file and its directory before SQLite opens them,
// so that each problem gets an error that says what to do. A file that
// does not exist is created empty (SQLite reads an empty file as a new
// database).
func checkPath(path string, allowNetwork bool) error {
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("sqlitestore: cannot create %s: directory %s does not exist; create it first: %w", path, dir, store.ErrUnavailable)
	case err != nil:
		return fmt.Errorf("sqlitestore: cannot use %s: %w: %w", path, err, store.ErrUnavailable)
	case !st.IsDir():
		return fmt.Errorf("sqlitestore: cannot create %s: %s is not a directory: %w", path, dir, store.ErrUnavailable)
	}
	if err := checkFileSystem(dir, allowNetwork); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return fmt.Errorf("sqlitestore: cannot create %s: %w; give a path in a directory this user can write to: %w", path, unwrapPath(err), store.ErrUnavailable)
		}
	case err != nil && isDir(path):
		return fmt.Errorf("sqlitestore: %s is a directory; give the path of a database file in it (e.g. %s): %w",
			path, filepath.Join(path, "herd.db"), store.ErrUnavailable)
	case err != nil:
		return fmt.Errorf("sqlitestore: cannot open %s for writing: %w; herd writes to it on every claim and renewal: "+
			"make it writable (and its directory, where SQLite keeps the -wal and -shm files): %w", path, unwrapPath(err), store.ErrUnavailable)
	}
	defer f.Close()
	head := make([]byte, len(sqliteMagic))
	n, err := io.ReadFull(f, head)
	switch {
	case n == 0 && (err == io.EOF || err == nil):
		// Empty: a new database.
	case err != nil && err != io.ErrUnexpectedEOF:
		return fmt.Errorf("sqlitestore: reading %s: %w: %w", path, err, store.ErrUnavailable)
	case !bytes.Equal(head[:n], sqliteMagic):
		return fmt.Errorf("sqlitestore: %s is not an SQLite database (it begins with %q); give herd a file of its own or a new path: %w: %w",
			path, head[:n], errNotHerd, store.ErrCorrupt)
	}
	if err := checkDirWritable(dir, path); err != nil {
		return err
	}
	return nil
}

func isDir(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}

// unwrapPath drops the *fs.PathError's repetition of the path.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
