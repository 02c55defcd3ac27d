package main

import (
	"context"
	"time"

	"github.com/herdhq/herd/store"
)

func (s *countingStore) Changes(ctx context.Context, group string, after store.Version, n int) ([]store.Change, store.Version, error) {
	return s.ChangesInto(ctx, group, after, n, nil)
}

// ChangesInto is Changes, decoding into dst as the wrapped store does
// (faultstore.Store.ChangesInto), so that a member's feed reuses its list
// of entries through it.
func (s *countingStore) ChangesInto(ctx context.Context, group string, after store.Version, n int, dst []store.Change) ([]store.Change, store.Version, error) {
	cs, v, err := s.fault.ChangesInto(ctx, group, after, n, dst)
	if err == nil && len(cs) > 0 {
		s.lastReadAt.Store(time.Now().UnixNano())
		only, n, b, v := loadReadCost(cs)
		if only {
			s.loadOnly.Add(1)
		}
		s.loadsRead.Add(n)
		s.loadBytes.Add(b)
		s.loadValues.Add(v)
	}
	return cs, v, err
}
