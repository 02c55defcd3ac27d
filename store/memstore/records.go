package memstore

import (
	"context"

	"github.com/herdhq/herd/store"
)

// Records implements store.Store, under one lock. A checkpoint written as
// nil (by Checkpoint or Restore) is returned as an empty, non-nil value:
// Checkpoint is nil only for a record that never had one, as on Redis.
func (s *Store) Records(ctx context.Context, group string, partitions []string) ([]store.Record, error) {
	now, err := s.begin(ctx, "records", store.ValidateRecords(group, partitions))
	if err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	g := s.group(group, false)
	out := make([]store.Record, 0, len(partitions))
	if g == nil {
		return out, nil
	}
	for _, p := range partitions {
		r := g.records[p]
		if r == nil {
			continue
		}
		rec := store.Record{Ownership: cloneOwnership(r.own)}
		if !r.since.IsZero() {
			rec.Since = max(now.Sub(r.since), 0)
		}
		if !r.checkpointed.IsZero() {
			rec.CheckpointAge = max(now.Sub(r.checkpointed), 0)
			if rec.Checkpoint == nil {
				rec.Checkpoint = []byte{}
			}
		}
		out = append(out, rec)
	}
	return out, nil
}
