package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/herdhq/herd/store"
)

// Loads (store.Load) are kept in herd_loads, one row per partition with
// its latest load; a LoadsReported entry keeps its session in the log's
// session column and its loads in the partitions column, one
// "<partition>\t<load>" line each (encodeLoads), which the tag chains.

// createLoads is herd_loads, created with the schema in a new file and by
// Open in a file of a herd before it (addLoadsTable).
const createLoads = `CREATE TABLE IF NOT EXISTS herd_loads (
		gid       INTEGER NOT NULL,
		partition TEXT NOT NULL,
		load      REAL NOT NULL,
		PRIMARY KEY (gid, partition)
	) STRICT, WITHOUT ROWID`

// addLoadsTable creates herd_loads in a file written by a herd before it,
// without a new SchemaVersion: a herd before it neither reads nor writes
// it, and its check of the tables lets other tables be.
func addLoadsTable(ctx context.Context, db *sql.DB) error {
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'herd_loads'`).Scan(&n); err != nil || n > 0 {
		return err
	}
	if _, err := db.ExecContext(ctx, createLoads); err != nil {
		return fmt.Errorf("adding the table of loads: %w", err)
	}
	return nil
}

// ReportLoads implements store.Store: one write transaction sets the loads
// and appends the entry, if the session is alive.
func (s *Store) ReportLoads(ctx context.Context, group, session string, loads []store.Load) error {
	if err := s.begin(ctx, "report loads", store.ValidateReportLoads(group, session, loads)); err != nil {
		return err
	}
	c := store.ReportChange(session, loads)
	var res error
	err := s.write(ctx, "report loads", group, false, func(w *wtx) error {
		res = fmt.Errorf("sqlitestore: report loads by session %q: %w", session, store.ErrSessionExpired)
		if w.g == nil {
			return nil
		}
		if _, live, err := w.alive(session); err != nil || !live {
			return err
		}
		for _, l := range c.Loads {
			if _, err := w.exec(`INSERT INTO herd_loads (gid, partition, load) VALUES (?, ?, ?)
				ON CONFLICT (gid, partition) DO UPDATE SET load = excluded.load`, w.g.id, l.Partition, l.Load); err != nil {
				return err
			}
		}
		res = nil
		w.log(c)
		return nil
	})
	if err != nil {
		return err
	}
	return res
}

// readLoads reads the group's loads, sorted by partition (a file whose
// herd_loads could not be created, opened read-only, has none).
func readLoads(c conn, gid int64) ([]store.Load, error) {
	rows, err := c.rows(`SELECT partition, load FROM herd_loads WHERE gid = ? ORDER BY partition`, gid)
	if err != nil {
		if strings.Contains(err.Error(), "no such table") {
			return nil, nil
		}
		return nil, err
	}
	defer rows.Close()
	var out []store.Load
	for rows.Next() {
		var l store.Load
		if err := rows.Scan(&l.Partition, &l.Load); err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, rows.Err()
}

// encodeLoads is the partitions column of a LoadsReported entry: a
// store.LoadEntry line each.
func encodeLoads(ls []store.Load) string {
	var b strings.Builder
	for _, l := range ls {
		b.WriteString(store.LoadEntry(l))
		b.WriteByte('\n')
	}
	return b.String()
}
