package faultstore

import (
	"context"
	"time"

	"github.com/herdhq/herd/store"
)

// Changes implements store.Store. It is subject to the cut, the latency
// and the failure rate like every call, and counted in Counts.Feeds. While
// the connection is cut a call fails at once, even one that would block.
// A call that was blocked when the cut began returns what the inner store
// returns (the cut takes effect on the next call).
func (s *Store) Changes(ctx context.Context, group string, after store.Version, max int) ([]store.Change, store.Version, error) {
	f, err := s.enter(ctx, "changes", &s.feeds)
	if err != nil {
		return nil, after, err
	}
	cs, v, err := s.inner.Changes(ctx, group, after, max)
	s.rows.Add(int64(len(cs)))
	if err := s.charge(ctx, "changes", func(c Cost) time.Duration { return c.Call + c.Entry*time.Duration(len(cs)) }); err != nil {
		return nil, after, err
	}
	if f == failAfter {
		return nil, after, lostReply("changes")
	}
	return cs, v, err
}

// ExpireSessions implements store.Store; a write, counted.
func (s *Store) ExpireSessions(ctx context.Context, group string) (time.Duration, error) {
	f, err := s.enter(ctx, "expire sessions", &s.writes)
	if err != nil {
		return 0, err
	}
	next, err := s.inner.ExpireSessions(ctx, group)
	if err := s.charge(ctx, "expire sessions", func(c Cost) time.Duration { return c.Call }); err != nil {
		return 0, err
	}
	if f == failAfter {
		return 0, lostReply("expire sessions")
	}
	return next, err
}

// ClaimBatch implements store.Store; one write, counted once, failed as a
// whole.
func (s *Store) ClaimBatch(ctx context.Context, group, session string, partitions []string) ([]store.ClaimResult, error) {
	f, err := s.enter(ctx, "claim batch", &s.writes)
	if err != nil {
		return nil, err
	}
	rs, err := s.inner.ClaimBatch(ctx, group, session, partitions)
	if err := s.charge(ctx, "claim batch", func(c Cost) time.Duration { return c.Call + c.Write*time.Duration(len(partitions)) }); err != nil {
		return nil, err
	}
	if f == failAfter {
		return nil, lostReply("claim batch")
	}
	return rs, err
}

// ReleaseBatch implements store.Store; one write, counted once, failed as a
// whole.
func (s *Store) ReleaseBatch(ctx context.Context, group, session string, held []store.Ownership) ([]error, error) {
	f, err := s.enter(ctx, "release batch", &s.writes)
	if err != nil {
		return nil, err
	}
	errs, err := s.inner.ReleaseBatch(ctx, group, session, held)
	if err := s.charge(ctx, "release batch", func(c Cost) time.Duration { return c.Call + c.Write*time.Duration(len(held)) }); err != nil {
		return nil, err
	}
	if f == failAfter {
		return nil, lostReply("release batch")
	}
	return errs, err
}
