package memstore

import (
	"container/heap"
	"context"
	"fmt"

	"github.com/herdhq/herd/store"
)

// DeleteGroup implements store.Store. The group's entry is removed from the
// store, so a deleted group costs no memory; if someone still watches it, an
// empty group takes its place so that the watchers keep their feed (as Wipe
// does).
func (s *Store) DeleteGroup(ctx context.Context, name string, force bool) error {
	if err := validate(name); err != nil {
		return fmt.Errorf("memstore: delete group: %w", err)
	}
	if _, err := s.begin(ctx, "delete group"); err != nil {
		return err
	}
	defer s.mu.Unlock()
	g := s.group(name, false)
	if g == nil {
		return nil
	}
	if n := len(g.sessions); n > 0 && !force {
		return fmt.Errorf("memstore: delete group %q: %d live session(s): %w", name, n, store.ErrGroupInUse)
	}
	had := len(g.sessions) > 0 || len(g.partitions) > 0 || len(g.records) > 0
	for _, ss := range g.sessions {
		heap.Remove(&s.expiry, ss.heapIndex)
		delete(g.byID, ss.id)
		g.publish(store.Event{Kind: store.EventLeft, Session: ss.id})
	}
	if had {
		g.publish(store.Event{Kind: store.EventPartitions})
	}
	// The log goes with the group: readers waiting in Changes wake up and
	// find it gone; the group's next write starts a new history.
	g.log.wake()
	if len(g.watchers) == 0 {
		delete(s.groups, name)
		return nil
	}
	// The watchers' close functions refer to g and to its watchers map:
	// the fresh group shares the map.
	s.groups[name] = &group{byID: map[string]*session{}, records: map[string]*record{}, watchers: g.watchers}
	return nil
}
