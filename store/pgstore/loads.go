package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/herdhq/herd/store"
)

// kindLoads is a LoadsReported entry in the log table (column kind; see
// schema.go). Its row keeps the reporting session in session and the
// loads in part_ids, one "<partition>\t<load>" each (ids hold no control
// characters), so the log table needs no column of its own for it.
const kindLoads = 9

// loadsSQL adds the table of the latest load of each partition to a
// schema of version 2 without a new version, as logTimeSQL adds the log's
// time: a herd before it neither reads nor writes it. A group's loads go
// with its row (DeleteGroup).
const loadsSQL = `
CREATE TABLE IF NOT EXISTS {{S}}.loads (
  gid bigint NOT NULL REFERENCES {{S}}.groups (gid) ON DELETE CASCADE,
  partition text COLLATE "C" NOT NULL,
  load double precision NOT NULL,
  PRIMARY KEY (gid, partition)
);
`

// errReportExpired is ReportLoads' refusal inside its transaction.
var errReportExpired = errors.New("session not alive")

// ReportLoads implements store.Store: one transaction locks the group's
// row, checks the session, sets the loads and appends the entry, and
// records the log's new end and notifies listeners through finish, as
// every other write does. The notification does not carry the entry's
// loads: a listener reads the log for it.
func (s *Store) ReportLoads(ctx context.Context, group, session string, loads []store.Load) error {
	if err := s.begin(ctx, "ReportLoads", store.ValidateReportLoads(group, session, loads)); err != nil {
		return err
	}
	c := store.ReportChange(session, loads)
	ids, vals, entry := make([]string, len(c.Loads)), make([]float64, len(c.Loads)), make([]string, len(c.Loads))
	for i, l := range c.Loads {
		ids[i], vals[i], entry[i] = l.Partition, l.Load, store.LoadEntry(l)
	}
	lock := s.sqlFor(`SELECT g.gid, EXISTS (SELECT 1 FROM {{S}}.sessions x WHERE x.gid = g.gid AND x.id = $2 AND x.expires > clock_timestamp())
FROM {{S}}.lock_group($1, false) g`)
	set := s.sqlFor(`INSERT INTO {{S}}.loads (gid, partition, load) SELECT $1, unnest($2::text[]), unnest($3::float8[])
ON CONFLICT (gid, partition) DO UPDATE SET load = excluded.load`)
	insert := s.sqlFor(`INSERT INTO {{S}}.log (gid, seq, tag, kind, session, part_ids)
  SELECT g.gid, g.seq + 1, {{S}}.new_tag(), ` + strconv.Itoa(kindLoads) + `, $2, $3 FROM {{S}}.groups g WHERE g.gid = $1`)
	finish := s.sqlFor(`SELECT {{S}}.finish(g, l.seq, l.tag, $2) FROM {{S}}.groups g
  JOIN {{S}}.log l ON l.gid = g.gid AND l.seq = g.seq + 1 WHERE g.gid = $1`)
	err := s.do(ctx, "ReportLoads", func(ctx context.Context) error {
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			var gid *int64
			var alive bool
			if err := tx.QueryRow(ctx, lock, group, session).Scan(&gid, &alive); err != nil {
				return err
			}
			if gid == nil || !alive {
				return errReportExpired
			}
			if _, err := tx.Exec(ctx, set, *gid, ids, vals); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, insert, *gid, session, entry); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, finish, *gid, int32(s.cfg.logLimit))
			return err
		})
	})
	if errors.Is(err, errReportExpired) {
		return fmt.Errorf("pgstore: ReportLoads by session %q: %w", session, store.ErrSessionExpired)
	}
	return err
}
