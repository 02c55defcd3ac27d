package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"modernc.org/sqlite"

	"github.com/herdhq/herd/store"
)

var _ store.Store = (*Store)(nil)

// Store is a store.Store on one SQLite file. It is safe for concurrent
// use, and any number of Stores, in this process or others on the host,
// may share the file.
type Store struct {
	path         string
	allowNetwork bool
	cfg          config
	now          func() time.Time
	logLimit     int
	notify       *notifier

	// file is the database file the path named when last checked (nil
	// after it was replaced and could not be opened again); swap
	// serializes leaving it for the new one (file.go), and retired keeps
	// the files left, whose sidecars close with the Store.
	file    atomic.Pointer[dbFile]
	swap    sync.Mutex
	retired []*dbFile

	// gate admits one write transaction of this Store at a time: they
	// would queue for SQLite's file lock anyway, and in Go they queue
	// without the busy handler's sleeps, renewals first (see writeAs).
	gate writeQueue

	cache recordCache // the last records read of each group (cache.go)

	ties tieState // the lock files of ties waited on (tie.go)

	mu     sync.Mutex
	closed bool
	// writing counts the writes between the gate and their release of
	// the sidecar's flock: Close waits for them before it closes the
	// sidecar they unlock through.
	writing sync.WaitGroup
	done    chan struct{} // closed by Close: waiting Changes end
}

func newStore(f *dbFile, path string, allowNetwork bool, cfg config) *Store {
	s := &Store{
		path:         path,
		allowNetwork: allowNetwork,
		cfg:          cfg,
		now:          cfg.now,
		logLimit:     cfg.logLimit,
		done:         make(chan struct{}),
	}
	s.file.Store(f)
	s.notify = newNotifier(s, cfg.pollInterval, !cfg.noInotify)
	return s
}

// Path is the absolute path of the database file.
func (s *Store) Path() string { return s.path }

// Close ends the waiting Changes calls and closes its connections. Sessions
// are not closed. Calls after Close fail with store.ErrUnavailable.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.done)
	s.mu.Unlock()
	s.writing.Wait()
	s.notify.close()
	s.swap.Lock()
	defer s.swap.Unlock()
	for _, f := range s.retired {
		f.closeSide()
	}
	f := s.file.Load()
	if f == nil {
		return nil
	}
	f.closeSide()
	return f.closeDB()
}

// enterWrite counts a write in (see writing); false if the Store is
// closed, and then nothing is counted.
func (s *Store) enterWrite() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.writing.Add(1)
	return true
}

// closedNow reports whether Close was called.
func (s *Store) closedNow() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// begin is store.Begin: args is the error of the store.Validate function
// of op, nil if valid.
func (s *Store) begin(ctx context.Context, op string, args error) error {
	return store.Begin(ctx, "sqlitestore", op, args, s.closedNow())
}

// micros is t in µs since 1970, the unit of every time in the database.
func micros(t time.Time) int64 { return t.UnixMicro() }

// ttlMicros rounds a TTL up to whole µs.
func ttlMicros(ttl time.Duration) int64 {
	us := int64(ttl / time.Microsecond)
	if ttl%time.Microsecond != 0 {
		us++
	}
	return us
}

// SQLite result codes (the primary code, the low byte of an extended one).
const (
	sqliteError    = 1
	sqlitePerm     = 3
	sqliteBusy     = 5
	sqliteLocked   = 6
	sqliteReadOnly = 8
	sqliteIOErr    = 10
	sqliteCorrupt  = 11
	sqliteFull     = 13
	sqliteCantOpen = 14
	sqliteNotADB   = 26
)

// code is err's primary SQLite result code, 0 if it has none.
func code(err error) int {
	var e *sqlite.Error
	if errors.As(err, &e) {
		return e.Code() & 0xff
	}
	return 0
}

// fail maps a database error onto the store's sentinels, keeping it in
// the chain.
func fail(op string, err error) error {
	switch code(err) {
	case sqliteBusy, sqliteLocked:
		return fmt.Errorf("sqlitestore: %s: another process held the database's write lock for longer than the busy timeout "+
			"(a process stopped inside a write?): %w: %w", op, store.ErrUnavailable, err)
	case sqliteReadOnly, sqlitePerm:
		return fmt.Errorf("sqlitestore: %s: the database cannot be written (read-only file, directory or file system): %w: %w", op, store.ErrUnavailable, err)
	case sqliteFull:
		return fmt.Errorf("sqlitestore: %s: the disk is full: %w: %w", op, store.ErrUnavailable, err)
	case sqliteIOErr, sqliteCantOpen:
		return fmt.Errorf("sqlitestore: %s: %w: %w", op, store.ErrUnavailable, err)
	case sqliteCorrupt, sqliteNotADB:
		return fmt.Errorf("sqlitestore: %s: the database file is damaged: %w: %w", op, store.ErrCorrupt, err)
	}
	// Anything else: a context that ended mid-call, a closed store, or a
	// statement this package did not expect to fail (a table changed by
	// hand).
	return fmt.Errorf("sqlitestore: %s: %w: %w", op, store.ErrUnavailable, err)
}

// group is a group's row, as a transaction found it.
type group struct {
	id      int64
	tag     uint64 // of the last entry (the random start when seq is 0)
	seq     uint64
	partset bool
	kind    string // the group's kind ("" if none named yet)
	digest  string // store.Digest of the stored set ("" if unknown)
}

// loadGroup reads the row of the group named name (nil if none).
func loadGroup(c conn, name string) (*group, error) {
	var g group
	var tag, seq int64
	err := c.row(qGroup, name).Scan(&g.id, &tag, &seq, &g.partset, &g.kind, &g.digest)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	g.tag, g.seq = uint64(tag), uint64(seq)
	return &g, nil
}

// read runs fn in a read transaction: one consistent view of the file,
// which never waits for writers (WAL).
func (s *Store) read(ctx context.Context, op string, fn func(c conn) error) error {
	f, err := s.current(ctx, op)
	if err != nil {
		return err
	}
	tx, err := f.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fail(op, err)
	}
	defer tx.Rollback()
	if err := fn(conn{s: s, f: f, ctx: ctx, tx: tx}); err != nil {
		var be *bailout
		if errors.As(err, &be) {
			return be.err
		}
		return fail(op, err)
	}
	return nil
}

// bailout carries an error fn wants returned as it is (not as a database
// error) out of read or write, rolling the transaction back.
type bailout struct{ err error }

func (b *bailout) Error() string { return b.err.Error() }
