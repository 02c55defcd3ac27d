package faultstore

import (
	"context"
	"time"

	"github.com/herdhq/herd/store"
)

// Records implements store.Store. It is a read like Snapshot: subject to
// the cut, the latency and the failure rate, and counted in Counts.Reads.
func (s *Store) Records(ctx context.Context, group string, partitions []string) ([]store.Record, error) {
	f, err := s.enter(ctx, "records", &s.reads)
	if err != nil {
		return nil, err
	}
	rs, err := s.inner.Records(ctx, group, partitions)
	if err := s.charge(ctx, "records", func(c Cost) time.Duration { return c.Call + c.RecordRead*time.Duration(len(rs)) }); err != nil {
		return nil, err
	}
	if f == failAfter {
		return nil, lostReply("records")
	}
	return rs, err
}
