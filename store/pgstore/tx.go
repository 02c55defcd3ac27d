package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

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
// transaction, so a Claim of the partition by another member waits until
// the transaction ends, and then sees what it committed (the checkpoint
// its Claim returns included). That Claim holds the group's row lock while
// it waits, so every claim and release of the group waits too: keep these
// transactions short. The server ends one that waits longer than the
// store's idle bound for fn's next statement (WithTxIdleTimeout, default
// 1s; InTx then returns an error and nothing of it is written), so a member
// stopped in the middle of one (SIGSTOP, a pause, a network cut) does not
// hold up its group until it resumes. fn must not call the store itself
// (its Checkpoint would wait for this very transaction).
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

	// The transaction locks the partition's record until it ends: if this
	// process stops in the middle (SIGSTOP, a pause, a cut), the server
	// ends it after the idle bound instead of holding the lock, and with
	// it the group's expiries and claims, until the process resumes. The
	// bound and the lock go in one round trip.
	var last []byte
	b := &pgx.Batch{}
	b.Queue("SELECT set_config('idle_in_transaction_session_timeout', $1, true)",
		strconv.FormatInt(s.cfg.txIdle.Milliseconds(), 10))
	b.Queue(s.q.fenceLock, f.Group, f.Partition, epoch).QueryRow(func(row pgx.Row) error { return row.Scan(&last) })
	err = tx.SendBatch(ctx, b).Close()
	switch {
	case isNoRows(err):
		return notOwner()
	case err != nil:
		return rolledBack(err)
	}
	next, err := fn(tx, last)
	if err != nil {
		return err
	}
	if len(next) > store.MaxCheckpointLength {
		return fmt.Errorf("pgstore: InTx on %q: checkpoint is %d bytes, more than the limit of %d: %w",
			f.Partition, len(next), store.MaxCheckpointLength, store.ErrInvalid)
	}
	var arg any // nil: keep the checkpoint
	if next != nil {
		arg = next
	}
	tag, err := tx.Exec(ctx, s.q.fenceWrite, f.Group, f.Partition, epoch, arg)
	if err != nil {
		return rolledBack(err)
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

func fenceQueries(S string) (lock, write string) {
	cond := ` AND o.partition = $2 AND o.epoch = $3::numeric AND o.session <> ''
  AND EXISTS (SELECT 1 FROM ` + S + `.sessions s WHERE s.gid = g.gid AND s.id = o.session AND s.expires > clock_timestamp())`
	lock = `SELECT o.checkpoint FROM ` + S + `.owners o JOIN ` + S + `.groups g ON g.gid = o.gid
WHERE g.name = $1` + cond + `
FOR UPDATE OF o`
	write = `UPDATE ` + S + `.owners o SET checkpoint = coalesce($4::bytea, o.checkpoint),
  checkpoint_at = CASE WHEN $4::bytea IS NULL THEN o.checkpoint_at ELSE clock_timestamp() END
FROM ` + S + `.groups g
WHERE g.name = $1 AND o.gid = g.gid` + cond
	return lock, write
}
