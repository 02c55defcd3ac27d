package faultstore

import (
	"context"
	"time"
)

// DeleteGroup implements store.Store. It is a write like any other: subject
// to the cut, the latency and the failure rate, and counted.
func (s *Store) DeleteGroup(ctx context.Context, group string, force bool) error {
	f, err := s.enter(ctx, "delete group", &s.writes)
	if err != nil {
		return err
	}
	err = s.inner.DeleteGroup(ctx, group, force)
	if err := s.charge(ctx, "delete group", func(c Cost) time.Duration { return c.Call }); err != nil {
		return err
	}
	if f == failAfter {
		return lostReply("delete group")
	}
	return err
}
