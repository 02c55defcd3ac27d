package memstore

import (
	"context"

	"github.com/herdhq/herd/store"
)

// GiveBack implements store.Store.
func (s *Store) GiveBack(ctx context.Context, group, partition, session string, epoch uint64) error {
	if _, err := s.begin(ctx, "give back", store.ValidateGiveBack(group, partition, session, epoch)); err != nil {
		return err
	}
	defer s.mu.Unlock()
	return s.releaseLocked(s.group(group, false), partition, session, epoch, true)
}
