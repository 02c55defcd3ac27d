package memstore

import (
	"context"
	"fmt"

	"github.com/herdhq/herd/store"
)

// GiveBack implements store.Store.
func (s *Store) GiveBack(ctx context.Context, group, partition, session string, epoch uint64) error {
	if err := validate(group, "partition", partition, "session", session); err != nil {
		return fmt.Errorf("memstore: give back: %w", err)
	}
	if err := store.ValidateEpoch(epoch); err != nil {
		return fmt.Errorf("memstore: give back %q: %w", partition, err)
	}
	if _, err := s.begin(ctx, "give back"); err != nil {
		return err
	}
	defer s.mu.Unlock()
	return s.releaseLocked(s.group(group, false), partition, session, epoch, true)
}
