package faultstore

import (
	"context"
	"time"

	"github.com/herdhq/herd/store"
)

// ReportLoads implements store.Store. It is a write like any other: subject
// to the cut, the latency and the failure rate, and counted.
func (s *Store) ReportLoads(ctx context.Context, group, session string, loads []store.Load) error {
	f, err := s.enter(ctx, "report loads", &s.writes)
	if err != nil {
		return err
	}
	err = s.inner.ReportLoads(ctx, group, session, loads)
	if err := s.charge(ctx, "report loads", func(c Cost) time.Duration { return c.Call + c.Write }); err != nil {
		return err
	}
	if f == failAfter {
		return lostReply("report loads")
	}
	return err
}
