package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/herdhq/herd/store"
)

// DeleteGroup implements store.Store: one write transaction deletes the
// group's sessions, partition set, records, checkpoints, log and row. The
// highest epoch of its records is kept in the file (herd_meta
// epoch_floor), so that the group, written again, never repeats an epoch
// whatever the clock does. Readers waiting in Changes find their version
// gone.
func (s *Store) DeleteGroup(ctx context.Context, group string, force bool) error {
	if err := s.begin(ctx, "delete group", store.ValidateGroup(group)); err != nil {
		return err
	}
	return s.write(ctx, "delete group", group, false, func(w *wtx) error {
		if w.g == nil {
			return nil
		}
		var live int
		if err := w.row("SELECT count(*) FROM herd_sessions WHERE gid = ? AND expires > ?", w.g.id, w.us).Scan(&live); err != nil {
			return err
		}
		if live > 0 && !force {
			return &bailout{fmt.Errorf("sqlitestore: delete group: %w", store.InUseError(group, live))}
		}
		// The highest epoch as uint64: those of 2^63 and more read as
		// negative, and are higher than every positive one.
		var neg, pos sql.NullInt64
		if err := w.row("SELECT max(CASE WHEN epoch < 0 THEN epoch END), max(CASE WHEN epoch >= 0 THEN epoch END) FROM herd_owners WHERE gid = ?",
			w.g.id).Scan(&neg, &pos); err != nil {
			return err
		}
		top := uint64(pos.Int64)
		if neg.Valid {
			top = uint64(neg.Int64)
		}
		floor, err := w.epochFloor()
		if err != nil {
			return err
		}
		if top > floor {
			if _, err := w.exec(`INSERT INTO herd_meta (key, value) VALUES ('epoch_floor', ?)
				ON CONFLICT (key) DO UPDATE SET value = excluded.value`, int64(top)); err != nil {
				return err
			}
		}
		if err := w.dropTieFiles(); err != nil {
			return err
		}
		for _, table := range []string{"herd_sessions", "herd_partitions", "herd_owners", "herd_checkpoints", "herd_log", "herd_loads", "herd_ties"} {
			if _, err := w.exec("DELETE FROM "+table+" WHERE gid = ?", w.g.id); err != nil {
				return err
			}
		}
		if _, err := w.exec("DELETE FROM herd_groups WHERE id = ?", w.g.id); err != nil {
			return err
		}
		w.entries, w.flushed, w.g, w.wake = nil, 0, nil, true // expiries logged above went with the log
		return nil
	})
}
