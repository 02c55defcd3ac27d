package faultstore

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/herdhq/herd/store"
)

// The methods of store.Store: each is one call of the inner store, subject
// to the cut, the latency and the failure rate, counted (Counts) and
// charged its cost on the server (WithServer).

// call makes one call of the inner store as every method does: counted in
// counter, delayed by the latency, failed as the cut and the failure rate
// say (before inner, or after it with its reply lost), and charged what
// cost says it costs, given inner's result.
func call[T any](ctx context.Context, s *Store, op string, counter *atomic.Int64, inner func() (T, error), cost func(Cost, T) time.Duration) (T, error) {
	var none T
	f, err := s.enter(ctx, op, counter)
	if err != nil {
		return none, err
	}
	v, err := inner()
	if err := s.charge(ctx, op, func(c Cost) time.Duration { return cost(c, v) }); err != nil {
		return none, err
	}
	if f == failAfter {
		return none, lostReply(op)
	}
	return v, err
}

// write is call for a write that returns only an error and costs a call
// and a write.
func (s *Store) write(ctx context.Context, op string, inner func() error) error {
	_, err := call(ctx, s, op, &s.writes, func() (struct{}, error) { return struct{}{}, inner() },
		func(c Cost, _ struct{}) time.Duration { return c.Call + c.Write })
	return err
}

// OpenSession implements store.Store.
func (s *Store) OpenSession(ctx context.Context, group, member string, weight int, ttl time.Duration) (string, error) {
	return call(ctx, s, "open session", &s.writes,
		func() (string, error) { return s.inner.OpenSession(ctx, group, member, weight, ttl) },
		func(c Cost, _ string) time.Duration { return c.Call + c.Write })
}

// KeepAlive implements store.Store.
func (s *Store) KeepAlive(ctx context.Context, group, session string, ttl time.Duration) (time.Duration, error) {
	return call(ctx, s, "keep alive", &s.writes,
		func() (time.Duration, error) { return s.inner.KeepAlive(ctx, group, session, ttl) },
		func(c Cost, _ time.Duration) time.Duration { return c.KeepAlive })
}

// CloseSession implements store.Store.
func (s *Store) CloseSession(ctx context.Context, group, session string) error {
	return s.write(ctx, "close session", func() error { return s.inner.CloseSession(ctx, group, session) })
}

// ExpireSessions implements store.Store; a write, counted.
func (s *Store) ExpireSessions(ctx context.Context, group string) (time.Duration, error) {
	return call(ctx, s, "expire sessions", &s.writes,
		func() (time.Duration, error) { return s.inner.ExpireSessions(ctx, group) },
		func(c Cost, _ time.Duration) time.Duration { return c.Call })
}

// SetPartitions implements store.Store. A set equal to the stored one is
// charged as one call: the store compares digests, not sets.
func (s *Store) SetPartitions(ctx context.Context, group string, ps store.PartitionSet) (store.SetResult, error) {
	return call(ctx, s, "set partitions", &s.writes,
		func() (store.SetResult, error) { return s.inner.SetPartitions(ctx, group, ps) },
		func(c Cost, res store.SetResult) time.Duration {
			if !res.Written {
				return c.Call
			}
			return c.Call + c.Partition*time.Duration(len(ps.Partitions))
		})
}

// Snapshot implements store.Store.
func (s *Store) Snapshot(ctx context.Context, group string) (*store.Snapshot, error) {
	return call(ctx, s, "snapshot", &s.reads,
		func() (*store.Snapshot, error) {
			snap, err := s.inner.Snapshot(ctx, group)
			if snap != nil {
				s.rows.Add(int64(len(snap.Sessions) + len(snap.Partitions) + len(snap.Owners) + len(snap.Malformed)))
			}
			return snap, err
		}, snapshotCost)
}

// changes is what Changes returns but its error.
type changes struct {
	cs []store.Change
	v  store.Version
}

// Changes implements store.Store. It is subject to the cut, the latency
// and the failure rate like every call, and counted in Counts.Feeds. While
// the connection is cut a call fails at once, even one that would block.
// A call that was blocked when the cut began returns what the inner store
// returns (the cut takes effect on the next call).
func (s *Store) Changes(ctx context.Context, group string, after store.Version, max int) ([]store.Change, store.Version, error) {
	return s.ChangesInto(ctx, group, after, max, nil)
}

// ChangesInto is Changes, passing dst on to the inner store's ChangesInto
// if it has one (redisstore's: it decodes the entries into dst's array),
// so that a member's feed reuses its list through the wrapper as without.
func (s *Store) ChangesInto(ctx context.Context, group string, after store.Version, max int, dst []store.Change) ([]store.Change, store.Version, error) {
	r, err := call(ctx, s, "changes", &s.feeds,
		func() (changes, error) {
			var cs []store.Change
			var v store.Version
			var err error
			if in, ok := s.inner.(interface {
				ChangesInto(context.Context, string, store.Version, int, []store.Change) ([]store.Change, store.Version, error)
			}); ok && dst != nil {
				cs, v, err = in.ChangesInto(ctx, group, after, max, dst)
			} else {
				cs, v, err = s.inner.Changes(ctx, group, after, max)
			}
			s.rows.Add(int64(len(cs)))
			return changes{cs, v}, err
		},
		func(c Cost, r changes) time.Duration { return c.Call + c.Entry*time.Duration(len(r.cs)) })
	if err != nil {
		return nil, after, err
	}
	return r.cs, r.v, nil
}

// Records implements store.Store. It is a read like Snapshot: subject to
// the cut, the latency and the failure rate, and counted in Counts.Reads.
func (s *Store) Records(ctx context.Context, group string, partitions []string) ([]store.Record, error) {
	return call(ctx, s, "records", &s.reads,
		func() ([]store.Record, error) { return s.inner.Records(ctx, group, partitions) },
		func(c Cost, rs []store.Record) time.Duration { return c.Call + c.RecordRead*time.Duration(len(rs)) })
}

// ClaimBatch implements store.Store; one write, counted once, failed as a
// whole.
func (s *Store) ClaimBatch(ctx context.Context, group, session string, partitions []string) ([]store.ClaimResult, error) {
	return call(ctx, s, "claim batch", &s.writes,
		func() ([]store.ClaimResult, error) { return s.inner.ClaimBatch(ctx, group, session, partitions) },
		func(c Cost, _ []store.ClaimResult) time.Duration {
			return c.Call + c.Write*time.Duration(len(partitions))
		})
}

// ReleaseBatch implements store.Store; one write, counted once, failed as a
// whole.
func (s *Store) ReleaseBatch(ctx context.Context, group, session string, held []store.Ownership) ([]error, error) {
	return call(ctx, s, "release batch", &s.writes,
		func() ([]error, error) { return s.inner.ReleaseBatch(ctx, group, session, held) },
		func(c Cost, _ []error) time.Duration { return c.Call + c.Write*time.Duration(len(held)) })
}

// GiveBack implements store.Store.
func (s *Store) GiveBack(ctx context.Context, group, partition, session string, epoch uint64) error {
	return s.write(ctx, "give back", func() error { return s.inner.GiveBack(ctx, group, partition, session, epoch) })
}

// Checkpoint implements store.Store; counted in Counts.Checkpoints too.
func (s *Store) Checkpoint(ctx context.Context, group, partition string, epoch uint64, value []byte) error {
	s.checkpoints.Add(1)
	_, err := call(ctx, s, "checkpoint", &s.writes,
		func() (struct{}, error) { return struct{}{}, s.inner.Checkpoint(ctx, group, partition, epoch, value) },
		func(c Cost, _ struct{}) time.Duration { return c.Checkpoint })
	return err
}

// Restore implements store.Store.
func (s *Store) Restore(ctx context.Context, group, partition string, epoch uint64, value []byte) error {
	return s.write(ctx, "restore", func() error { return s.inner.Restore(ctx, group, partition, epoch, value) })
}

// Request implements store.Store. It is a write like any other: subject to
// the cut, the latency and the failure rate, and counted.
func (s *Store) Request(ctx context.Context, group string, r store.Request) error {
	return s.write(ctx, "request", func() error { return s.inner.Request(ctx, group, r) })
}

// ReportLoads implements store.Store. It is a write like any other: subject
// to the cut, the latency and the failure rate, and counted.
func (s *Store) ReportLoads(ctx context.Context, group, session string, loads []store.Load) error {
	return s.write(ctx, "report loads", func() error { return s.inner.ReportLoads(ctx, group, session, loads) })
}

// DeleteGroup implements store.Store. It is a write like any other: subject
// to the cut, the latency and the failure rate, and counted.
func (s *Store) DeleteGroup(ctx context.Context, group string, force bool) error {
	_, err := call(ctx, s, "delete group", &s.writes,
		func() (struct{}, error) { return struct{}{}, s.inner.DeleteGroup(ctx, group, force) },
		func(c Cost, _ struct{}) time.Duration { return c.Call })
	return err
}
