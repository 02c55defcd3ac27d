package sqlitestore

// Session ties (store.ConnTied; docs/takeover.md): the member's process
// holds an exclusive flock on a lock file of the session's own,
// <db>-herd-ties/<session id>, for the tie's life. The kernel releases it
// the moment the process dies (kill -9, the OOM killer, a panic), and
// nothing releases it while the process lives but Close: a live member
// cannot lose its lock. The file's device and inode are kept in
// herd_ties, so a file removed or replaced is never taken for a free lock
// (the session keeps its TTL, and its member fences: checkTie).
//
// Others learn of a death two ways. Each tie watches the next tie of the
// group (by session id, around a ring): a goroutine blocks in flock on
// that tie's file, and the kernel wakes it when the lock is released. The
// ring follows joins at once (a tie rings the file's doorbell) and leaves
// as they come (the watched lock is released). Then, and in every
// ExpireSessions (the backstop: a tie nobody watched yet), the tie's
// Store tries the lock of every uncut tie of the group without waiting,
// marks those it got as cut, and caps their sessions' expiry at cut +
// grace; when the grace has passed, the tie that saw the cut calls
// ExpireSessions, which ends them, logged.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/herdhq/herd/store"
)

var _ store.ConnTied = (*Store)(nil)

// tieCheckEvery is how often a tie checks that its lock file is still at
// its path (one stat).
const tieCheckEvery = 250 * time.Millisecond

// tiesDir is the directory of the lock files of ties of the file at path.
func tiesDir(path string) string { return path + "-herd-ties" }

func dirOf(path string) string { return filepath.Dir(path) }

// tiePath is the lock file of session's tie.
func (s *Store) tiePath(session string) string {
	return filepath.Join(tiesDir(s.path), session)
}

// tieState is what a Store keeps of ties: the lock files its goroutines
// wait on, and a channel closed when one of them is released.
type tieState struct {
	mu      sync.Mutex
	waiting map[string]bool // by lock file path: a wait runs (or could not)
	freed   chan struct{}
}

// freedCh returns a channel closed when a lock waited on is next
// released.
func (ts *tieState) freedCh() <-chan struct{} {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.freed == nil {
		ts.freed = make(chan struct{})
	}
	return ts.freed
}

// await makes sure a goroutine waits for the lock of path (the file k)
// to be released. The wait cannot be cancelled (flock): it ends when the
// lock is released, by its holder's Close or death; so a Store waits at
// most once on each lock file, whichever of its ties asked, and at most
// one goroutine per tie of the group is left waiting when its ties move
// on, or the Store is closed, until that tie ends.
func (ts *tieState) await(path string, k fileKey) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.waiting[path] {
		return
	}
	if ts.waiting == nil {
		ts.waiting = map[string]bool{}
	}
	ts.waiting[path] = true
	go func() {
		waited, err := awaitTieFree(path, k)
		if !waited || err != nil {
			return // missing, replaced or failed: left to ExpireSessions
		}
		ts.mu.Lock()
		defer ts.mu.Unlock()
		delete(ts.waiting, path)
		if ts.freed != nil {
			close(ts.freed)
			ts.freed = nil
		}
	}()
}

// TieSession implements store.ConnTied (see the top of this file). A
// read-only store, a store opened with network_fs=allow, and a system
// without flock give errors.ErrUnsupported.
func (s *Store) TieSession(ctx context.Context, group, session string, cfg store.TieConfig) (store.Tie, error) {
	if err := s.begin(ctx, "tie session", store.ValidateCloseSession(group, session)); err != nil {
		return nil, err
	}
	if cfg.TTL <= 0 || cfg.Grace <= 0 || cfg.Grace >= cfg.TTL {
		return nil, fmt.Errorf("sqlitestore: tie session: grace %v must be above 0 and below the TTL %v: %w", cfg.Grace, cfg.TTL, store.ErrInvalid)
	}
	if s.cfg.readOnly || !tieLocksSupported {
		return nil, fmt.Errorf("sqlitestore: tie session: the store is read-only or this system has no flock: %w", errors.ErrUnsupported)
	}
	if s.allowNetwork {
		// A network file system's locks live on its server, which can
		// drop them (a lease not renewed) while their holder lives.
		return nil, fmt.Errorf("sqlitestore: tie session: the store allows a network file system (network_fs=allow), whose locks can be lost while their holder lives: the session keeps its TTL: %w", errors.ErrUnsupported)
	}
	if !store.IsSessionID(session) {
		return nil, fmt.Errorf("sqlitestore: tie session %q: %w", session, store.ErrSessionExpired)
	}
	mode := os.FileMode(0o644)
	if st, err := os.Stat(s.path); err == nil {
		mode = st.Mode().Perm()
	}
	path := s.tiePath(session)
	f, k, err := lockTieFile(path, mode)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: tie session: creating its lock file (the directory %s must be writable): %w: %w", tiesDir(s.path), store.ErrUnavailable, err)
	}
	var res error
	err = s.write(ctx, "tie session", group, false, func(w *wtx) error {
		if _, live, err := w.alive(session); err != nil || !live {
			res = fmt.Errorf("sqlitestore: tie session %q: %w", session, store.ErrSessionExpired)
			return err
		}
		w.wake = true // the doorbell: the group's ties read the ring again
		_, err := w.exec(qInsertTie, w.g.id, session, int64(k.dev), int64(k.ino), ttlMicros(cfg.Grace))
		return err
	})
	if err == nil {
		err = res
	}
	if err != nil {
		f.Close()
		os.Remove(path)
		return nil, err
	}
	t := &tie{s: s, group: group, session: session, path: path, f: f, cfg: cfg,
		stop: make(chan struct{}), done: make(chan struct{}), TieLoss: store.NewTieLoss()}
	go t.watch()
	return t, nil
}

// tie is one session's tie: its locked file and the goroutine that
// watches the ring.
type tie struct {
	s              *Store
	group, session string
	path           string
	f              *os.File // holds the flock until Close
	cfg            store.TieConfig
	stop           chan struct{} // closed by Close
	done           chan struct{} // closed when watch returned
	ending         sync.WaitGroup
	seenCut        map[string]bool // the ring's cut ties seen (watch's own)
	*store.TieLoss                 // Lost, Err
	closeOnce      sync.Once
}

// Close stops the watch and closes the lock file, which releases the
// lock: the session then ends after the grace, unless it was closed. The
// file is removed by the ExpireSessions that finds the session gone.
func (t *tie) Close() error {
	t.closeOnce.Do(func() {
		close(t.stop)
		<-t.done
		t.ending.Wait()
		t.f.Close()
	})
	return nil
}

// watch follows the ring until Close: it waits on the next tie's lock,
// cuts the ties whose lock is free when one is released, and checks its
// own file at its path every tieCheckEvery.
func (t *tie) watch() {
	defer close(t.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-t.stop:
		case <-t.s.done:
		case <-ctx.Done():
		}
		cancel()
	}()
	check := time.NewTicker(tieCheckEvery)
	defer check.Stop()
	var changed, freed <-chan struct{}
	for follow := true; ; {
		if follow {
			// Both before the read: a change or a release after it
			// wakes the select below.
			changed, freed = t.s.notify.next(), t.s.ties.freedCh()
			gone, cutNew := t.follow(ctx)
			if gone != nil {
				t.Lose(gone)
				return
			}
			if cutNew {
				t.cut(ctx) // ends them after their grace, whoever cut them
			}
		}
		follow = true
		select {
		case <-ctx.Done():
			return
		case <-check.C:
			if !sameFile(t.path, t.f) {
				t.Lose(fmt.Errorf("sqlitestore: the lock file %s of session %q was removed or replaced: %w", t.path, t.session, store.ErrUnavailable))
				return
			}
			follow = false
		case <-changed:
		case <-freed:
			t.cut(ctx)
		}
	}
}

// follow reads the ring and waits on the next tie's lock. It returns an
// error if this tie is no more (its session ended, or it was cut), and
// whether the ring has ties cut that this tie has not seen cut before
// (cut by another store, whose watch may not end their sessions: it may
// have closed).
func (t *tie) follow(ctx context.Context) (gone error, cutNew bool) {
	type ringTie struct {
		id  string
		k   fileKey
		cut bool
	}
	var ring []ringTie
	err := t.s.read(ctx, "tie ring", func(c conn) error {
		rows, err := c.rows(qRing, t.group)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var r ringTie
			var dev, ino int64
			var cut *int64
			if err := rows.Scan(&r.id, &dev, &ino, &cut); err != nil {
				return err
			}
			r.k, r.cut = fileKey{dev: uint64(dev), ino: uint64(ino)}, cut != nil
			ring = append(ring, r)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, false // the store failed: the sessions keep their TTL meanwhile
	}
	me, next := -1, -1
	for i, r := range ring {
		switch {
		case r.id == t.session:
			me = i
			if r.cut {
				return fmt.Errorf("sqlitestore: the tie of session %q was cut: %w", t.session, store.ErrSessionExpired), false
			}
		case r.cut:
			if !t.seenCut[r.id] {
				if t.seenCut == nil {
					t.seenCut = map[string]bool{}
				}
				t.seenCut[r.id], cutNew = true, true
			}
		case next == -1 || (r.id > t.session && ring[next].id < t.session):
			next = i
		}
	}
	if me == -1 {
		return fmt.Errorf("sqlitestore: the tie of session %q is gone (the session ended): %w", t.session, store.ErrSessionExpired), false
	}
	for id := range t.seenCut { // forget those whose session ended
		if !slices.ContainsFunc(ring, func(r ringTie) bool { return r.id == id }) {
			delete(t.seenCut, id)
		}
	}
	if next >= 0 {
		t.s.ties.await(t.s.tiePath(ring[next].id), ring[next].k)
	}
	return nil, cutNew
}

// cut cuts the group's ties whose lock is free, and ends their sessions
// once their grace has passed (in a goroutine: the watch goes on).
func (t *tie) cut(ctx context.Context) {
	d, err := t.s.expire(ctx, t.group)
	if err != nil {
		// The lock stays free, so the next wait on it ends at once: not
		// again before a pause.
		pause := time.NewTimer(tieCheckEvery)
		defer pause.Stop()
		select {
		case <-ctx.Done():
		case <-pause.C:
		}
		return
	}
	if d <= 0 {
		return
	}
	t.ending.Go(func() {
		wait := time.NewTimer(d)
		defer wait.Stop()
		select {
		case <-ctx.Done():
		case <-wait.C:
			// A failure leaves the sessions to the members' own
			// expiry calls, as without ties.
			_, _ = t.s.expire(ctx, t.group)
		}
	})
}
