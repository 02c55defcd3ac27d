package memstore

import (
	"context"

	"github.com/herdhq/herd/store"
)

// Request implements store.Store: it appends the request's entry, and
// changes nothing else.
func (s *Store) Request(ctx context.Context, group string, r store.Request) error {
	if _, err := s.begin(ctx, "request", store.ValidateRequest(group, r)); err != nil {
		return err
	}
	defer s.mu.Unlock()
	s.logChange(s.group(group, true), r.Change())
	return nil
}
