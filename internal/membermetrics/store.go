package membermetrics

import (
	"context"
	"time"

	"github.com/herdhq/herd/store"
)

// Store returns st counting the member's store calls that fail. KeepAlive
// passes through uncounted: the renewal loop counts it with its latency
// (Renewed).
func (mm *Metrics) Store(st store.Store) store.Store { return metricStore{Store: st, mm: mm} }

// Unwrap returns the store the metrics count the calls of, whose optional
// interfaces (store.ConnTied) the wrapper does not forward.
func (s metricStore) Unwrap() store.Store { return s.Store }

type metricStore struct {
	store.Store
	mm *Metrics
}

func (s metricStore) OpenSession(ctx context.Context, group, member string, weight int, ttl time.Duration) (string, error) {
	id, err := s.Store.OpenSession(ctx, group, member, weight, ttl)
	return id, s.mm.storeErr(ctx, opOpenSession, err)
}

func (s metricStore) CloseSession(ctx context.Context, group, session string) error {
	return s.mm.storeErr(ctx, opCloseSession, s.Store.CloseSession(ctx, group, session))
}

func (s metricStore) SetPartitions(ctx context.Context, group string, set store.PartitionSet) (store.SetResult, error) {
	res, err := s.Store.SetPartitions(ctx, group, set)
	return res, s.mm.storeErr(ctx, opSetPartitions, err)
}

func (s metricStore) Snapshot(ctx context.Context, group string) (*store.Snapshot, error) {
	snap, err := s.Store.Snapshot(ctx, group)
	return snap, s.mm.storeErr(ctx, opSnapshot, err)
}

func (s metricStore) GiveBack(ctx context.Context, group, partition, session string, epoch uint64) error {
	return s.mm.storeErr(ctx, opGiveBack, s.Store.GiveBack(ctx, group, partition, session, epoch))
}

func (s metricStore) Checkpoint(ctx context.Context, group, partition string, epoch uint64, value []byte) error {
	return s.mm.storeErr(ctx, opCheckpoint, s.Store.Checkpoint(ctx, group, partition, epoch, value))
}

func (s metricStore) Restore(ctx context.Context, group, partition string, epoch uint64, value []byte) error {
	return s.mm.storeErr(ctx, opRestore, s.Store.Restore(ctx, group, partition, epoch, value))
}

func (s metricStore) Changes(ctx context.Context, group string, after store.Version, max int) ([]store.Change, store.Version, error) {
	cs, v, err := s.Store.Changes(ctx, group, after, max)
	return cs, v, s.mm.storeErr(ctx, opChanges, err)
}

func (s metricStore) ExpireSessions(ctx context.Context, group string) (time.Duration, error) {
	next, err := s.Store.ExpireSessions(ctx, group)
	return next, s.mm.storeErr(ctx, opExpire, err)
}

func (s metricStore) ClaimBatch(ctx context.Context, group, session string, partitions []string) ([]store.ClaimResult, error) {
	rs, err := s.Store.ClaimBatch(ctx, group, session, partitions)
	return rs, s.mm.storeErr(ctx, opClaimBatch, err)
}

func (s metricStore) ReleaseBatch(ctx context.Context, group, session string, held []store.Ownership) ([]error, error) {
	errs, err := s.Store.ReleaseBatch(ctx, group, session, held)
	return errs, s.mm.storeErr(ctx, opReleaseBatch, err)
}

func (s metricStore) ReportLoads(ctx context.Context, group, session string, loads []store.Load) error {
	return s.mm.storeErr(ctx, opReportLoads, s.Store.ReportLoads(ctx, group, session, loads))
}

// ChangesInto is Changes, passing dst on to the store's ChangesInto if it
// has one (redisstore's decodes the entries into dst's array), so that a
// member's feed reuses its list of entries through the metrics as without.
func (s metricStore) ChangesInto(ctx context.Context, group string, after store.Version, max int, dst []store.Change) ([]store.Change, store.Version, error) {
	in, ok := s.Store.(interface {
		ChangesInto(context.Context, string, store.Version, int, []store.Change) ([]store.Change, store.Version, error)
	})
	if !ok || dst == nil {
		return s.Changes(ctx, group, after, max)
	}
	cs, v, err := in.ChangesInto(ctx, group, after, max, dst)
	return cs, v, s.mm.storeErr(ctx, opChanges, err)
}
