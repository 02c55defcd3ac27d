package pgstore

import (
	"context"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/herdhq/herd/store"
)

var _ store.GroupLister = (*Store)(nil)

// Groups implements store.GroupLister: the groups that have a log (every
// write logs), a stored partition set, a session or an ownership record, by
// name; a name herd could not have written (a row added by hand) is
// skipped.
func (s *Store) Groups(ctx context.Context) ([]string, error) {
	if err := s.begin(ctx, "Groups", nil); err != nil {
		return nil, err
	}
	S := s.qschema
	var out []string
	err := s.do(ctx, "Groups", func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, `SELECT g.name FROM `+S+`.groups g
WHERE g.seq > 0 OR g.partset OR g.kind <> ''
  OR EXISTS (SELECT 1 FROM `+S+`.sessions x WHERE x.gid = g.gid)
  OR EXISTS (SELECT 1 FROM `+S+`.owners x WHERE x.gid = g.gid)
ORDER BY g.name`)
		if err == nil {
			out, err = pgx.CollectRows(rows, pgx.RowTo[string])
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(out, func(name string) bool { return store.ValidateID("group", name) != nil }), nil
}
