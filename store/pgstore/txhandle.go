package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/herdhq/herd/store"
)

// fnTx is the transaction handle InTx gives its function: InTx's
// transaction, which only InTx ends. Commit refuses (InTx commits, with
// the checkpoint and fenced, when the function returns nil); Rollback
// makes InTx roll everything back when the function returns; Begin makes
// a savepoint, whose Commit and Rollback end only the savepoint. A
// statement run through it after the transaction ended anyway (a COMMIT or
// ROLLBACK sent with Exec) fails instead of committing on its own;
// statements sent through Conn() cannot be stopped, but InTx finds out
// when the function returns.
type fnTx struct {
	pgx.Tx
	partition  string
	rolledBack bool // the function called Rollback
	ended      bool // a statement ended the transaction
}

var _ pgx.Tx = (*fnTx)(nil)

// endedNow reports whether the connection is out of any transaction: the
// function ended InTx's (a failed transaction, 'E', is still one).
func (t *fnTx) endedNow() bool {
	return t.Tx.Conn().PgConn().TxStatus() == 'I'
}

// usable is nil while statements may run through the handle.
func (t *fnTx) usable() error {
	switch {
	case t.rolledBack:
		return fmt.Errorf("pgstore: InTx on %q: the function called Rollback: the transaction is rolled back when it returns, so no statement runs after: %w",
			t.partition, store.ErrInvalid)
	case t.ended || t.endedNow():
		t.ended = true
		return fmt.Errorf("pgstore: InTx on %q: the function ended InTx's transaction (COMMIT or ROLLBACK through Exec or the connection); refusing a statement that would commit on its own: %w",
			t.partition, store.ErrInvalid)
	}
	return nil
}

// Commit does not commit: InTx does, when the function returns nil.
func (t *fnTx) Commit(context.Context) error {
	return fmt.Errorf("pgstore: InTx on %q: the function may not commit InTx's transaction: InTx commits it, fenced and with the checkpoint, when the function returns nil (the transaction goes on): %w",
		t.partition, store.ErrInvalid)
}

// Rollback makes InTx roll the whole transaction back when the function
// returns, and refuse the function's later statements.
func (t *fnTx) Rollback(context.Context) error {
	t.rolledBack = true
	return nil
}

func (t *fnTx) Begin(ctx context.Context) (pgx.Tx, error) {
	if err := t.usable(); err != nil {
		return nil, err
	}
	return t.Tx.Begin(ctx)
}

func (t *fnTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if err := t.usable(); err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := t.Tx.Exec(ctx, sql, args...)
	if err == nil && t.endedNow() {
		t.ended = true
		return tag, fmt.Errorf("pgstore: InTx on %q: the statement %q ended InTx's transaction: what the function wrote before it may be committed without the fence; InTx will fail: %w",
			t.partition, tag.String(), store.ErrInvalid)
	}
	return tag, err
}

func (t *fnTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := t.usable(); err != nil {
		return nil, err
	}
	return t.Tx.Query(ctx, sql, args...)
}

func (t *fnTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if err := t.usable(); err != nil {
		return errRow{err}
	}
	return t.Tx.QueryRow(ctx, sql, args...)
}

func (t *fnTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if err := t.usable(); err != nil {
		return errBatch{err}
	}
	return t.Tx.SendBatch(ctx, b)
}

func (t *fnTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	if err := t.usable(); err != nil {
		return 0, err
	}
	return t.Tx.CopyFrom(ctx, table, columns, src)
}

func (t *fnTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	if err := t.usable(); err != nil {
		return nil, err
	}
	return t.Tx.Prepare(ctx, name, sql)
}

// errRow is a pgx.Row whose Scan returns err.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// errBatch is a pgx.BatchResults whose every result is err.
type errBatch struct{ err error }

func (b errBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, b.err }
func (b errBatch) Query() (pgx.Rows, error)         { return nil, b.err }
func (b errBatch) QueryRow() pgx.Row                { return errRow(b) }
func (b errBatch) Close() error                     { return b.err }
func (b errBatch) Tx() pgx.Tx                       { return nil }
