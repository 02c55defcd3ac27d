package faultstore

import (
	"context"
	"time"

	"github.com/herdhq/herd/store"
)

// Request implements store.Store. It is a write like any other: subject to
// the cut, the latency and the failure rate, and counted.
func (s *Store) Request(ctx context.Context, group string, r store.Request) error {
	f, err := s.enter(ctx, "request", &s.writes)
	if err != nil {
		return err
	}
	err = s.inner.Request(ctx, group, r)
	if err := s.charge(ctx, "request", func(c Cost) time.Duration { return c.Call + c.Write }); err != nil {
		return err
	}
	if f == failAfter {
		return lostReply("request")
	}
	return err
}
