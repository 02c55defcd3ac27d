package storetest

import (
	"context"

	"github.com/herdhq/herd/store"
)

// IntoRecorder is a store with a ChangesInto (the optional form of Changes
// that decodes into the caller's list) that notes the list it was given in
// Got and appends the store's changes into it: for tests of what passes a
// list on.
type IntoRecorder struct {
	store.Store
	Got []store.Change
}

// ChangesInto notes dst and returns the store's Changes appended to dst[:0].
func (s *IntoRecorder) ChangesInto(ctx context.Context, group string, after store.Version, max int, dst []store.Change) ([]store.Change, store.Version, error) {
	s.Got = dst
	cs, v, err := s.Changes(ctx, group, after, max)
	return append(dst[:0], cs...), v, err
}
