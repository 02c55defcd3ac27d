package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/herdhq/herd/store"
)

// Fence names the ownership a transaction of InTx is fenced by: what a
// handler's herd.Claim holds (its Partition and Epoch) in the member's
// group.
type Fence struct {
	Group     string
	Partition string
	Epoch     uint64
}

// InTx runs fn in one database transaction together with the partition's
// checkpoint, fenced by f: the transaction commits only if the partition's
// record is still at f.Epoch and its session alive, both when the
// transaction starts and when it ends. A member that lost the partition
// (its session expired, or another member claimed it since) can therefore
// neither write the checkpoint nor anything fn wrote: the whole
// transaction is rolled back and InTx returns an error wrapping
// store.ErrNotOwner. This makes the processing of a partition effectively
// once when its results live in the same database as herd's tables:
// results and progress commit together, or not at all.
//
// fn gets the transaction and last, the partition's checkpoint as of the
// start of the transaction (nil if none was ever written); it returns the
// new checkpoint (nil leaves it as it is) or an error, which rolls the
// transaction back and is returned as it is.
//
// The partition's record is locked (SELECT ... FOR UPDATE) for the whole
// transaction. No operation of the store waits for that lock while it
// holds its group's: a Claim of the partition while the owner's session
// lives is refused as usual (store.ErrClaimed), and once the session has
// ended (expired or closed) the Claim ends the transaction's connection
// (pg_terminate_backend; the transaction could not commit anyway, since
// the fence is checked again at its end) and takes the partition over, so
// a member stopped in the middle of one (SIGSTOP, a pause, a network cut)
// never holds up its group or its partition past its session. The
// transaction reads, in pg_stat_activity, as application_name
// "herd InTx <session id>" for that. The server also ends one that waits
// longer than the idle bound for fn's next statement (WithTxIdleTimeout,
// default 1s). InTx then returns an error and nothing of it is written.
//
// fn may run any statement through tx, and savepoints (tx.Begin). It may
// not end the transaction: tx.Commit is refused (InTx commits when fn
// returns nil), tx.Rollback makes InTx roll everything back and return an
// error, and statements through tx after a COMMIT or ROLLBACK sent by fn
// (with Exec, or through tx.Conn()) are refused. A transaction fn ended
// anyway is found when it returns: InTx writes no checkpoint and returns
// an error wrapping store.ErrInvalid; what fn wrote before the end may
// have been committed without the fence. fn must not call the store
// itself (its Checkpoint would wait for this very transaction, up to
// WithLockTimeout).
//
// From a handler:
//
//	func(c *herd.Claim) error {
//		fence := pgstore.Fence{Group: "orders", Partition: c.Partition, Epoch: c.Epoch}
//		for c.Context().Err() == nil {
//			err := st.InTx(c.Context(), fence, func(tx pgx.Tx, last []byte) ([]byte, error) {
//				// read the input after last, write the results with tx
//				return next, nil
//			})
//			if errors.Is(err, store.ErrNotOwner) {
//				return nil // lost the partition: nothing of this round was written
//			}
//		}
//		return nil
//	}
//
// Progress kept this way is the checkpoint in the store: do not also
// record it with the Claim's Mark or Checkpoint, whose writes are
// asynchronous and could put back an older value after this one.
// Claim.LastCheckpoint is the value when the partition was claimed; last
// is the current one.
func (s *Store) InTx(ctx context.Context, f Fence, fn func(tx pgx.Tx, last []byte) (next []byte, err error)) error {
	if err := s.begin(ctx, "InTx", store.ValidateCheckpoint(f.Group, f.Partition, f.Epoch, nil)); err != nil {
		return err
	}
	if fn == nil {
		return fmt.Errorf("pgstore: InTx on %q: no function: %w", f.Partition, store.ErrInvalid)
	}
	epoch := strconv.FormatUint(f.Epoch, 10)
	notOwner := func() error {
		return fmt.Errorf("pgstore: InTx on %q at epoch %d: rolled back: %w", f.Partition, f.Epoch, store.ErrNotOwner)
	}
	// Before the commit is sent, a failure leaves nothing written: the
	// transaction is rolled back (or was never begun).
	rolledBack := func(err error) error {
		return s.fail(fmt.Sprintf("InTx on %q: rolled back, nothing written", f.Partition), err)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return rolledBack(err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()

	last, xid, err := s.lockFence(ctx, tx, f, epoch)
	switch {
	case isNoRows(err):
		return notOwner()
	case err != nil:
		return rolledBack(err)
	}
	h := &fnTx{Tx: tx, partition: f.Partition}
	next, err := fn(h, last)
	if err != nil {
		return err
	}
	if h.rolledBack {
		return fmt.Errorf("pgstore: InTx on %q: the function called Rollback: rolled back, nothing written: %w", f.Partition, store.ErrInvalid)
	}
	if h.ended || h.endedNow() {
		return ended(f, "ended the transaction (COMMIT or ROLLBACK through Exec or the connection)",
			"what it wrote after that other than through the handle (which refused it) committed on its own")
	}
	if len(next) > store.MaxCheckpointLength {
		return fmt.Errorf("pgstore: InTx on %q: checkpoint is %d bytes, more than the limit of %d: %w",
			f.Partition, len(next), store.MaxCheckpointLength, store.ErrInvalid)
	}
	var arg any // nil: keep the checkpoint
	if next != nil {
		arg = next
	}
	// The transaction must still be the one that locked the record: a
	// COMMIT AND CHAIN (or COMMIT; BEGIN) leaves the connection in a new
	// one. Its id is read in the round trip of the fenced write, and the
	// commit is sent only if it is the same.
	var now string
	b := &pgx.Batch{}
	b.Queue("SELECT pg_current_xact_id()::text").QueryRow(func(row pgx.Row) error { return row.Scan(&now) })
	var tag pgconn.CommandTag
	b.Queue(s.q.fenceWrite, f.Group, f.Partition, epoch, arg).Exec(func(ct pgconn.CommandTag) error { tag = ct; return nil })
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return rolledBack(err)
	}
	if now != xid {
		return ended(f, "ended the transaction and began another (COMMIT AND CHAIN, or COMMIT then BEGIN)",
			"what it wrote after that is rolled back")
	}
	if tag.RowsAffected() == 0 {
		return notOwner()
	}
	if err := tx.Commit(ctx); err != nil {
		if errors.Is(err, pgx.ErrTxClosed) {
			return rolledBack(err)
		}
		return s.wrap("pgstore: InTx: commit (it may or may not have been applied)", err, store.ErrUnavailable)
	}
	return nil
}

// lockFence checks the fence and locks the partition's record, in one
// round trip: it returns the checkpoint and the transaction's id.
//
// The lock is held until the transaction ends. If this process stops in
// the middle (SIGSTOP, a pause, a cut) while the server waits for the next
// statement, the server ends the transaction after the idle bound
// (WithTxIdleTimeout). If it stops while the server sends it rows, its
// backend is active, not idle: the transaction names its session in its
// application_name (intxAppPrefix), so that once the session has expired
// a claim of the partition ends it (locks.go). The wait for the record's
// lock is bounded by the store's lock timeout, set for that statement
// only: fn's statements keep the connection's own lock_timeout.
func (s *Store) lockFence(ctx context.Context, tx pgx.Tx, f Fence, epoch string) (last []byte, xid string, err error) {
	b := &pgx.Batch{}
	b.Queue("SELECT set_config('idle_in_transaction_session_timeout', $1, true)", millis(s.cfg.txIdle))
	b.Queue("SELECT set_config('herd.lock_timeout', current_setting('lock_timeout'), true)")
	b.Queue("SELECT set_config('lock_timeout', $1, true)", millis(s.cfg.lockTimeout))
	b.Queue(s.q.fenceLock, f.Group, f.Partition, epoch).QueryRow(func(row pgx.Row) error {
		var app string
		return row.Scan(&last, &xid, &app)
	})
	b.Queue("SELECT set_config('lock_timeout', current_setting('herd.lock_timeout'), true)")
	err = tx.SendBatch(ctx, b).Close()
	return last, xid, err
}

func millis(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

// ended is InTx's error when its function ended the transaction itself.
func ended(f Fence, how, after string) error {
	return fmt.Errorf("pgstore: InTx on %q at epoch %d: the function %s: what it wrote before that may have been committed without the fence, "+
		"%s; the checkpoint was not written "+
		"(InTx commits its transaction when the function returns nil: return an error to roll it back; never end it yourself): %w",
		f.Partition, f.Epoch, how, after, store.ErrInvalid)
}

func fenceQueries(S string) (lock, write string) {
	cond := ` AND o.partition = $2 AND o.epoch = $3::numeric AND o.session <> ''
  AND EXISTS (SELECT 1 FROM ` + S + `.sessions s WHERE s.gid = g.gid AND s.id = o.session AND s.expires > clock_timestamp())`
	lock = `SELECT o.checkpoint, pg_current_xact_id()::text, set_config('application_name', ` + quoteLiteral(intxAppPrefix) + ` || o.session, true)
FROM ` + S + `.owners o JOIN ` + S + `.groups g ON g.gid = o.gid
WHERE g.name = $1` + cond + `
FOR UPDATE OF o`
	write = `UPDATE ` + S + `.owners o SET checkpoint = coalesce($4::bytea, o.checkpoint),
  checkpoint_at = CASE WHEN $4::bytea IS NULL THEN o.checkpoint_at ELSE clock_timestamp() END
FROM ` + S + `.groups g
WHERE g.name = $1 AND o.gid = g.gid` + cond
	return lock, write
}
