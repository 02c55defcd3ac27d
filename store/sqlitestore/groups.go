package sqlitestore

import (
	"context"
	"slices"

	"github.com/herdhq/herd/store"
)

var _ store.GroupLister = (*Store)(nil)

// Groups implements store.GroupLister: the groups that have a log (every
// write logs), a stored partition set, a session or an ownership record, by
// name; a name herd could not have written (a row added by hand) is
// skipped.
func (s *Store) Groups(ctx context.Context) ([]string, error) {
	if err := s.begin(ctx, "groups", nil); err != nil {
		return nil, err
	}
	var out []string
	err := s.read(ctx, "groups", func(c conn) error {
		out = out[:0]
		rows, err := c.rows(`SELECT g.name FROM herd_groups g
WHERE g.seq > 0 OR g.partset != 0
  OR EXISTS (SELECT 1 FROM herd_sessions x WHERE x.gid = g.id)
  OR EXISTS (SELECT 1 FROM herd_owners x WHERE x.gid = g.id)`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var name string
			if err := rows.Scan(&name); err != nil {
				return err
			}
			if store.ValidateID("group", name) == nil {
				out = append(out, name)
			}
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(out) // byte order, whatever the column's collation
	return out, nil
}
