package memstore

import (
	"container/heap"
	"context"
	"fmt"

	"github.com/herdhq/herd/store"
)

// DeleteGroup implements store.Store. The group's entry is removed from the
// store, so a deleted group costs no memory.
func (s *Store) DeleteGroup(ctx context.Context, name string, force bool) error {
	if _, err := s.begin(ctx, "delete group", store.ValidateGroup(name)); err != nil {
		return err
	}
	defer s.mu.Unlock()
	g := s.group(name, false)
	if g == nil {
		return nil
	}
	if n := len(g.sessions); n > 0 && !force {
		return fmt.Errorf("memstore: delete group: %w", store.InUseError(name, n))
	}
	for _, ss := range g.sessions {
		heap.Remove(&s.expiry, ss.heapIndex)
		delete(g.byID, ss.id)
	}
	// The log goes with the group: readers waiting in Changes wake up and
	// find it gone; the group's next write starts a new history.
	g.log.wake()
	delete(s.groups, name)
	return nil
}
