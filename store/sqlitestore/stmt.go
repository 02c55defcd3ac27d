package sqlitestore

import (
	"context"
	"database/sql"
)

// The statements in queries are prepared once per Store, at Open (and by
// database/sql once on each connection that runs them), not parsed on
// every call: parsing was about half the CPU of a claim. They are all
// prepared up front because preparing one later, from inside a
// transaction, would wait for a free connection of the pool while holding
// one: with every connection held that way, a deadlock.

// prepare prepares every statement of qs.
func (f *dbFile) prepare(ctx context.Context, qs []string) error {
	for _, q := range qs {
		st, err := f.db.PrepareContext(ctx, q)
		if err != nil {
			return err
		}
		f.stmts[q] = st
	}
	return nil
}

// conn runs statements in a transaction, prepared ones where it can.
type conn struct {
	s   *Store
	f   *dbFile // the file tx is on
	ctx context.Context
	tx  *sql.Tx
}

func (c conn) exec(query string, args ...any) (sql.Result, error) {
	if st := c.f.stmts[query]; st != nil {
		return c.tx.StmtContext(c.ctx, st).ExecContext(c.ctx, args...)
	}
	return c.tx.ExecContext(c.ctx, query, args...)
}

func (c conn) row(query string, args ...any) *sql.Row {
	if st := c.f.stmts[query]; st != nil {
		return c.tx.StmtContext(c.ctx, st).QueryRowContext(c.ctx, args...)
	}
	return c.tx.QueryRowContext(c.ctx, query, args...)
}

func (c conn) rows(query string, args ...any) (*sql.Rows, error) {
	if st := c.f.stmts[query]; st != nil {
		return c.tx.StmtContext(c.ctx, st).QueryContext(c.ctx, args...)
	}
	return c.tx.QueryContext(c.ctx, query, args...)
}
