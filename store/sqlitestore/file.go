package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/herdhq/herd/store"
)

// The path, not the file, is the store's address, as a server's address is
// for the other backends. A file removed or replaced (mv) while Stores use
// it keeps living for them, unlinked or under no name: a Store opened
// after that creates or opens the new file, and the two would each own the
// same partitions, for ever, in files that never meet. So every call first
// checks that the path still names the file its connections hold (device
// and inode, one stat: about a microsecond), and so does the notifier
// every poll interval (a second). Once it names another file, or none, the
// Store never uses the old one again: it opens the path anew (creating an
// empty database if nothing is there) and goes on there. To its members
// that is a store that lost its data: their sessions are gone (KeepAlive
// fails with ErrSessionExpired, so they stop their handlers at their next
// renewal, or at once when a waiting Changes wakes and the new file's log
// is another history), their records are gone (ErrNotOwner), and they
// restore their checkpoints and hold as after any data loss.
//
// What this bounds: a Store that checked the path before it was replaced
// may still finish that one call on the old file, and a member renews
// every third of its TTL or so, so its handlers stop within a renewal
// interval (and never later than their fence time) after the path names
// another file, or about a second if a waiting Changes notices first. A
// member that opened the new file meanwhile may claim at once: that
// overlap is the one left, and it is shorter than the TTL.

// dbFile is one open database file: the connections on it, the statements
// prepared for them, the sidecar (<db>-herd) next to it, and what the
// path named when they were opened.
type dbFile struct {
	db    *sql.DB
	stmts map[string]*sql.Stmt // prepared at open, read-only after (stmt.go)
	// side is the sidecar file <db>-herd: writers queue on its flock
	// (lock_unix.go) and ring it as the doorbell (notify.go); nil if it
	// could not be opened.
	side *os.File
	// info is the path's stat when the connections were opened.
	info os.FileInfo
}

// maxOpenTries bounds how often openFile tries again when the path is
// replaced while it opens it.
const maxOpenTries = 3

// openAny opens the path as cfg asks: read-only (openReadOnly), or for
// writing, creating the database if needed (openFile).
func openAny(ctx context.Context, path string, allowNetwork bool, cfg config) (*dbFile, error) {
	if cfg.readOnly {
		return openReadOnly(ctx, path, allowNetwork, cfg)
	}
	return openFile(ctx, path, allowNetwork, cfg)
}

// openFile checks the path, opens the database on it and prepares the
// statements. It stats the path before and after: if the path named
// another file by then, some connection may hold either, so it closes
// everything and tries again.
func openFile(ctx context.Context, path string, allowNetwork bool, cfg config) (*dbFile, error) {
	for try := 1; ; try++ {
		if err := checkPath(path, allowNetwork); err != nil {
			return nil, err
		}
		before, err := os.Stat(path)
		if err != nil {
			return nil, fmt.Errorf("sqlitestore: opening %s: %w: %w", path, store.ErrUnavailable, err)
		}
		db, err := openDB(ctx, path, cfg.busyTimeout)
		if err != nil {
			return nil, err
		}
		f := &dbFile{db: db, stmts: map[string]*sql.Stmt{}, info: before}
		// The ties' statements too: herd_ties exists in a file opened
		// for writing (initSchema adds it), not always in a read-only one.
		err = f.prepare(ctx, queries)
		if err == nil {
			err = f.prepare(ctx, tieQueries)
		}
		if err != nil {
			f.closeDB()
			return nil, fail("preparing statements on "+path, err)
		}
		if f.at(path) == nil {
			f.side = openSidecar(path, path+"-herd")
			return f, nil
		}
		f.closeDB()
		if try == maxOpenTries {
			return nil, fmt.Errorf("sqlitestore: opening %s: the file was replaced while it was being opened, %d times: %w",
				path, maxOpenTries, store.ErrUnavailable)
		}
	}
}

// errReplaced says that the path names another file than f, or none.
var errReplaced = errors.New("the path names another file")

// at returns nil if path still names f's file, errReplaced if it names
// another or none, or the error of the stat.
func (f *dbFile) at(path string) error {
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return errReplaced
	case err != nil:
		return err
	case !os.SameFile(st, f.info):
		return errReplaced
	}
	return nil
}

// closeDB closes the connections and statements. The sidecar stays open
// until closeSide: a write of this file may still hold its flock, and its
// descriptor must not be reused under it meanwhile.
func (f *dbFile) closeDB() error {
	for _, st := range f.stmts {
		st.Close()
	}
	return f.db.Close()
}

func (f *dbFile) closeSide() {
	if f.side != nil {
		f.side.Close()
	}
}

// current returns the file the path names, checking first that it is the
// one the Store has open; if not, the Store leaves that file for good and
// opens the path again (see the top of this file).
func (s *Store) current(ctx context.Context, op string) (*dbFile, error) {
	f := s.file.Load()
	if f != nil {
		switch err := f.at(s.path); {
		case err == nil:
			return f, nil
		case !errors.Is(err, errReplaced):
			return nil, fmt.Errorf("sqlitestore: %s: checking %s: %w: %w", op, s.path, store.ErrUnavailable, err)
		}
	}
	return s.reopen(ctx, op, f)
}

// reopen leaves old (nil: none is open, an earlier reopen failed) and
// opens the path again. Calls that find the file replaced at once all come
// here; the first reopens, the others use what it opened.
func (s *Store) reopen(ctx context.Context, op string, old *dbFile) (*dbFile, error) {
	s.swap.Lock()
	defer s.swap.Unlock()
	if s.closedNow() {
		return nil, fmt.Errorf("sqlitestore: %s: store is closed: %w", op, store.ErrUnavailable)
	}
	cur := s.file.Load()
	if cur != nil && cur != old {
		return cur, nil
	}
	if cur != nil {
		// Never again: a write on it would land in a file nobody else
		// sees. Writes already past their check may still commit there.
		s.file.Store(nil)
		s.retired = append(s.retired, cur)
		_ = cur.closeDB()
	}
	f, err := openAny(ctx, s.path, s.allowNetwork, s.cfg)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: %s: %s was replaced; opening it again: %w", op, s.path, err)
	}
	s.cache.reset()
	s.file.Store(f)
	s.notify.wake() // readers waiting on the old file read the new one
	return f, nil
}
