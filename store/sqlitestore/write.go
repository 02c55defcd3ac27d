package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/herdhq/herd/store"
)

// wtx is one write transaction on a group: it holds the database's write
// lock from its first statement (BEGIN IMMEDIATE), so everything it reads
// is still true when it commits, and the entries it logs are appended in
// the same commit as the change.
type wtx struct {
	conn
	// step runs the one-row statements of a batch (claimOne, release,
	// the log's inserts): its context has no Done channel, so the driver
	// does not start a goroutine per statement to interrupt it (a fifth
	// of the CPU of a ClaimBatch, BenchmarkClaimBatch). A call's context
	// still ends the transaction between statements: database/sql rolls
	// a Tx back when its context ends, and the next statement fails.
	step    conn
	now     time.Time
	us      int64  // now in µs
	g       *group // nil if the group has no row (and was not to be created)
	entries []store.Change
	flushed int  // entries already appended to the table
	wake    bool // wake readers even without entries (DeleteGroup)
	// removeAfter: lock files of ties forgotten, removed after the commit.
	removeAfter []tieFile
}

// write runs fn in a write transaction on the group named name. If the
// group has no row, create makes one (a new history of its log); else fn
// finds w.g nil. Before fn, the group's sessions whose TTL has passed are
// removed and logged as expired. fn returns a database error (the
// transaction is rolled back) or nil (it is committed, with the entries
// fn logged); a result such as ErrClaimed is returned by fn through a
// variable of its caller, after the expiries are committed. A bailout
// error rolls back and is returned as it is.
func (s *Store) write(ctx context.Context, op, name string, create bool, fn func(w *wtx) error) error {
	return s.writeAs(ctx, false, op, name, create, fn)
}

// writeAs is write; a renewal goes before the Store's other waiting writes
// (gate): a member that checkpoints many partitions queues many writes,
// and its renewal, if it waited behind them all on a busy file, would pass
// its deadline and the member would fence itself with nothing wrong.
// Renewals are few (one per session every third of its TTL or so), so the
// others do not starve.
func (s *Store) writeAs(ctx context.Context, renewal bool, op, name string, create bool, fn func(w *wtx) error) error {
	if !s.gate.take(renewal, ctx.Done(), s.done) {
		if ctx.Err() != nil {
			return fmt.Errorf("sqlitestore: %s: %w: %w", op, store.ErrUnavailable, ctx.Err())
		}
		return fmt.Errorf("sqlitestore: %s: store is closed: %w", op, store.ErrUnavailable)
	}
	if !s.enterWrite() {
		s.gate.leave()
		return fmt.Errorf("sqlitestore: %s: store is closed: %w", op, store.ErrUnavailable)
	}
	defer s.writing.Done() // deferred first, so done last: after the unlock
	f, err := s.current(ctx, op)
	if err != nil {
		s.gate.leave()
		return err
	}
	handedOver, err := s.lockWriter(ctx, f, op)
	if err != nil {
		if !handedOver {
			s.gate.leave()
		}
		return err
	}
	defer func() {
		s.unlockWriter(f)
		s.gate.leave()
	}()
	// Checked again with the write lock held: a write that waited for it
	// while the file was replaced must not commit to the old one.
	if f.at(s.path) != nil {
		return fmt.Errorf("sqlitestore: %s: %s was removed or replaced meanwhile: %w", op, s.path, store.ErrUnavailable)
	}
	tx, err := f.db.BeginTx(ctx, nil)
	if err != nil {
		return fail(op, err)
	}
	defer tx.Rollback()
	// The clock is read once the write lock is held, so that the times of
	// successive writes follow the order of their commits (as far as the
	// wall clock does).
	w := &wtx{conn: conn{s: s, f: f, ctx: ctx, tx: tx}, now: s.now()}
	w.step = w.conn
	w.step.ctx = context.WithoutCancel(ctx)
	w.us = micros(w.now)
	if err := w.run(name, create, fn); err != nil {
		var be *bailout
		if errors.As(err, &be) {
			return be.err
		}
		return fail(op, err)
	}
	if err := tx.Commit(); err != nil {
		return fail(op, err)
	}
	removeTieFiles(w.removeAfter)
	if len(w.entries) > 0 || w.wake {
		s.notify.wake()
		f.ring()
	}
	return nil
}

func (w *wtx) run(name string, create bool, fn func(w *wtx) error) error {
	g, err := loadGroup(w.conn, name)
	if err != nil {
		return err
	}
	if g == nil && create {
		if g, err = w.createGroup(name); err != nil {
			return err
		}
	}
	w.g = g
	if g != nil {
		if err := w.expireDue(); err != nil {
			return err
		}
	}
	if err := fn(w); err != nil {
		return err
	}
	return w.flush()
}

// createGroup inserts the group's row: a new history of its log, from a
// random tag.
func (w *wtx) createGroup(name string) (*group, error) {
	g := &group{tag: randomTag()}
	err := w.row(qCreateGroup,
		name, int64(g.tag)).Scan(&g.id)
	return g, err
}

// randomTag is a history's first tag: 63 random bits, not 0.
func randomTag() uint64 {
	for {
		if t := rand.Uint64() >> 1; t != 0 {
			return t
		}
	}
}

// expireDue removes the group's sessions whose TTL has passed and logs
// each as expired, in id order.
func (w *wtx) expireDue() error {
	rows, err := w.rows(qDueSessions, w.g.id, w.us)
	if err != nil {
		return err
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(ids) == 0 {
		return err
	}
	if _, err := w.exec(qDeleteDue, w.g.id, w.us); err != nil {
		return err
	}
	for _, id := range ids {
		w.log(store.Change{Kind: store.SessionExpired, Session: id})
	}
	return nil
}

// log adds an entry to append at commit.
func (w *wtx) log(c store.Change) { w.entries = append(w.entries, c) }

// flush appends the logged entries to the group's log, chaining their
// tags, moves the group's version, and trims the log to the store's bound.
func (w *wtx) flush() error {
	if w.flushed == len(w.entries) {
		return nil
	}
	if w.g == nil {
		return errors.New("internal error: entries logged for a group without a row")
	}
	tag, seq := w.g.tag, w.g.seq
	for _, c := range w.entries[w.flushed:] {
		c = stored(c)
		seq++
		parts := encodePartitions(c)
		tag = chain(tag, c, parts)
		var p any
		if c.Kind == store.PartitionsSet || c.Kind == store.LoadsReported {
			p = parts
		}
		if _, err := w.step.exec(qInsertEntry, w.g.id, int64(seq), int64(tag), int64(c.Kind), c.Session, c.Member,
			int64(c.Weight), c.Partition, int64(c.Epoch), c.GivenBack, p, w.us); err != nil {
			return err
		}
	}
	if _, err := w.exec(qMoveGroup, int64(tag), int64(seq), w.g.id); err != nil {
		return err
	}
	w.g.tag, w.g.seq = tag, seq
	w.flushed = len(w.entries)
	// Keep the last logLimit entries readable: the entry at a reader's
	// version is kept too, for the check of its tag.
	if limit := uint64(w.s.logLimit); seq > limit {
		if _, err := w.exec(qTrimLog, w.g.id, int64(seq-limit)); err != nil {
			return err
		}
	}
	return nil
}

// alive reports whether session is a live session of the group, and its
// member.
func (w *wtx) alive(session string) (member string, ok bool, err error) {
	if w.g == nil || session == "" {
		return "", false, nil
	}
	err = w.row(qAlive,
		w.g.id, session, w.us).Scan(&member)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	return member, err == nil, err
}

// aliveIn is alive's answer for session, asked of the database once per
// session in cache (nil: every time): a transaction's time is fixed, and
// the calls that use it change no session, so neither does the answer.
func (w *wtx) aliveIn(cache map[string]bool, session string) (bool, error) {
	if ok, known := cache[session]; known {
		return ok, nil
	}
	_, ok, err := w.alive(session)
	if err == nil && cache != nil {
		cache[session] = ok
	}
	return ok, err
}

// nextExpiry is the time until the earliest expiry of a live session of
// the group, 0 if none is alive. A session's time left is never shown
// above its TTL: after the wall clock stepped back, its deadline is
// further away than the TTL it was renewed with.
func (w *wtx) nextExpiry() (time.Duration, error) {
	if w.g == nil {
		return 0, nil
	}
	var next sql.NullInt64
	err := w.row(qNextExpiry,
		w.us, w.g.id, w.us).Scan(&next)
	if err != nil || !next.Valid {
		return 0, err
	}
	return time.Duration(max(next.Int64, 1)) * time.Microsecond, nil
}

// epochFloor is the highest epoch of any group deleted from the file.
func (w *wtx) epochFloor() (uint64, error) {
	var v int64
	err := w.row(qEpochFloor).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return uint64(v), err
}
