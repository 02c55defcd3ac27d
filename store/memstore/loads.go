package memstore

import (
	"context"
	"fmt"

	"github.com/herdhq/herd/store"
)

// ReportLoads implements store.Store: it appends the report's entry and
// merges its loads into the group's latest loads, a sorted list that
// snapshots share (replaced, never changed).
func (s *Store) ReportLoads(ctx context.Context, group, session string, loads []store.Load) error {
	if _, err := s.begin(ctx, "report loads", store.ValidateReportLoads(group, session, loads)); err != nil {
		return err
	}
	defer s.mu.Unlock()
	g := s.group(group, false)
	if g == nil || !g.alive(session) {
		return fmt.Errorf("memstore: report loads of session %q: %w", session, store.ErrSessionExpired)
	}
	c := store.ReportChange(session, loads)
	g.loads = store.MergeLoads(g.loads, c.Loads)
	s.logChange(g, c)
	return nil
}
