package memstore

import (
	"context"
	"slices"

	"github.com/herdhq/herd/store"
)

var _ store.GroupLister = (*Store)(nil)

// Groups implements store.GroupLister: the groups that have a live
// session, a partition set or kind, an ownership record or a log. (The store keeps
// an entry for a group that was only read; it is not listed.)
func (s *Store) Groups(ctx context.Context) ([]string, error) {
	if _, err := s.begin(ctx, "groups", nil); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.groups))
	for name, g := range s.groups {
		if len(g.sessions) > 0 || g.partsSet || g.kind != "" || len(g.records) > 0 || g.log.gen != 0 {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out, nil
}
