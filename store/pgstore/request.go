package pgstore

import (
	"context"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/herdhq/herd/store"
)

// kindRequested is a Requested entry in the log table (column kind; see
// schema.go). Its row keeps the request's action in the session column,
// which a request has no use for, and its target in partition or member.
const kindRequested = 8

// Request implements store.Store: one transaction locks the group's row
// (creating it if there is none), appends the entry after the group's last
// one, and records the log's new end and notifies listeners through the
// schema's finish function, as every other write does. It needs no
// function of its own, so it works on a schema of version 2 without an
// upgrade (a member of an older herd reads the entry as one it cannot
// decode, and reads a new snapshot).
func (s *Store) Request(ctx context.Context, group string, r store.Request) error {
	if err := s.begin(ctx, "Request", store.ValidateRequest(group, r)); err != nil {
		return err
	}
	insert := s.sqlFor(`WITH g AS (SELECT * FROM {{S}}.lock_group($1, true))
INSERT INTO {{S}}.log (gid, seq, tag, kind, session, member, partition)
  SELECT g.gid, g.seq + 1, {{S}}.new_tag(), ` + strconv.Itoa(kindRequested) + `, $2, $3, $4 FROM g`)
	finish := s.sqlFor(`SELECT {{S}}.finish(g, l.seq, l.tag, $2) FROM {{S}}.lock_group($1, false) g
  JOIN {{S}}.log l ON l.gid = g.gid AND l.seq = g.seq + 1`)
	return s.do(ctx, "Request", func(ctx context.Context) error {
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, insert, group, r.Action, r.Member, r.Partition); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, finish, group, int32(s.cfg.logLimit))
			return err
		})
	})
}
