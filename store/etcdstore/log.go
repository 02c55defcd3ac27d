package etcdstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/herdhq/herd/store"
)

// The log is the group's keys l/<seq>, each the entries of one
// transaction up to seq, written with the sequence q (see write.go). Changes reads the entries
// after a version in one range read; when there are none it watches the
// log (and the sessions' liveness keys, to log an expiry when the cluster
// ends a lease) from the revision after that read. A watch that cannot
// start at that revision (compacted) reads again: the entries are keys,
// which compaction keeps, so only a version whose entry was trimmed (or
// is of another history) is ErrVersionGone.

// errGone is a reader's version the log cannot continue.
var errGone = errors.New("gone")

// Changes implements store.Store.
func (s *Store) Changes(ctx context.Context, group string, after store.Version, max int) ([]store.Change, store.Version, error) {
	const op = "changes"
	if err := store.ValidateChanges(group, max); err != nil {
		return nil, after, fmt.Errorf("etcdstore: %s: %w", op, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, after, failure(op, err)
	}
	g := s.groupKey(group)
	until := time.Now().Add(maxWait)
	for {
		cs, rev, err := s.readLog(ctx, g, after, max)
		switch {
		case errors.Is(err, errGone):
			return nil, after, fmt.Errorf("etcdstore: %s after %v in group %q: %w", op, after, group, store.ErrVersionGone)
		case errors.Is(err, store.ErrCorrupt):
			return nil, after, fmt.Errorf("etcdstore: %s: %w", op, err)
		case err != nil:
			return nil, after, failure(op, err)
		case len(cs) > 0:
			return cs, cs[len(cs)-1].Version, nil
		}
		expired, err := s.waitLog(ctx, g, rev, until)
		switch {
		case err != nil && errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil:
			return nil, after, nil // at rest until the caller's deadline
		case err != nil:
			return nil, after, failure(op, err)
		case time.Now().After(until):
			return nil, after, nil
		case expired:
			if _, err := s.expireDue(ctx, op, group); err != nil {
				return nil, after, err
			}
		}
	}
}

// readLog reads the entries after after (at most max) and the revision of
// the read; errGone if the log cannot continue from after.
func (s *Store) readLog(ctx context.Context, g string, after store.Version, max int) ([]store.Change, int64, error) {
	// Each key holds the entries of one transaction, up to its own seq:
	// the first key at or after l/<after> holds the reader's entry.
	from := after.Seq
	if from == 0 {
		from = 1
	}
	resp, err := s.c.Txn(withLeader(ctx)).Then(clientv3.OpGet(g+"q"),
		clientv3.OpGet(logKey(g, from), clientv3.WithRange(g+"l0"), clientv3.WithLimit(int64(max)+1))).Commit()
	if err != nil {
		return nil, 0, err
	}
	rev := resp.Header.Revision
	seq, err := decodeSeq(resp.Responses[0].GetResponseRange().Kvs)
	if err != nil {
		return nil, 0, err
	}
	kvs := resp.Responses[1].GetResponseRange().Kvs
	switch {
	case after == (store.Version{}):
		if seq.exists {
			return nil, 0, errGone
		}
		return nil, rev, nil
	case !seq.exists || seq.Seq < after.Seq:
		return nil, 0, errGone
	case seq.Seq == after.Seq:
		if seq.Tag != after.Tag {
			return nil, 0, errGone
		}
		return nil, rev, nil
	}
	cs := make([]store.Change, 0, min(max, int(seq.Seq-after.Seq)))
	next := after.Seq // the seq of the entry the reader expects next
	for _, kv := range kvs {
		var es []json.RawMessage
		if err := json.Unmarshal(kv.Value, &es); err != nil || len(es) == 0 {
			return nil, 0, fmt.Errorf("log key %q cannot be decoded: %v: %w", kv.Key, err, store.ErrCorrupt)
		}
		var last uint64
		if _, err := fmt.Sscanf(strings.TrimPrefix(string(kv.Key), g+"l/"), "%d", &last); err != nil || last < uint64(len(es)) {
			return nil, 0, fmt.Errorf("log key %q names no seq: %w", kv.Key, store.ErrCorrupt)
		}
		first := last - uint64(len(es)) + 1
		if next == after.Seq {
			// The key holding the reader's entry: its tag must be the reader's.
			if first > after.Seq {
				return nil, 0, errGone // trimmed
			}
			var e entry
			if err := json.Unmarshal(es[after.Seq-first], &e); err != nil || e.Tag != after.Tag {
				return nil, 0, errGone
			}
			es, first, next = es[after.Seq-first+1:], after.Seq+1, after.Seq+1
		}
		if first != next {
			return nil, 0, fmt.Errorf("the log has a gap before %q: %w", kv.Key, store.ErrCorrupt)
		}
		for _, v := range es {
			if len(cs) == max {
				return cs, rev, nil
			}
			c, err := s.decodeEntry(ctx, g, kv.Key, v, rev)
			if err != nil {
				return nil, 0, err
			}
			c.Version.Seq = next
			next++
			cs = append(cs, c)
		}
	}
	if next == after.Seq {
		return nil, 0, errGone // trimmed
	}
	return cs, rev, nil
}

// decodeEntry decodes a log entry read at rev, reading the set a
// PartitionsSet entry names at that revision (errGone if it is deleted).
func (s *Store) decodeEntry(ctx context.Context, g string, key, v []byte, rev int64) (store.Change, error) {
	var e entry
	if err := json.Unmarshal(v, &e); err != nil {
		return store.Change{}, fmt.Errorf("log entry in %q cannot be decoded: %v: %w", key, err, store.ErrCorrupt)
	}
	c := store.Change{Version: store.Version{Tag: e.Tag}, Kind: e.Kind, Session: e.Session, Member: e.Member, Weight: e.Weight,
		Partition: e.Partition, Epoch: e.Epoch, GivenBack: e.GivenBack}
	if e.Kind != store.PartitionsSet {
		return c, nil
	}
	if e.Set == "" {
		c.Partitions = make([]store.Partition, len(e.Parts))
		for i, p := range e.Parts {
			c.Partitions[i] = store.Partition{ID: p.ID, Weight: p.Weight}
		}
		return c, nil
	}
	resp, err := s.c.Get(withLeader(ctx), setPrefix(g, e.Set), clientv3.WithPrefix(), clientv3.WithRev(rev))
	if err != nil {
		return c, err
	}
	if len(resp.Kvs) != e.Chunks {
		return c, errGone // replaced since: the reader takes a new snapshot
	}
	if c.Partitions, err = decodeSet(resp.Kvs); err != nil {
		return c, err
	}
	if c.Partitions == nil {
		c.Partitions = []store.Partition{}
	}
	return c, nil
}

// waitLog waits from revision rev+1 for a log entry, the deletion of the
// group's sequence, or the end of a session's lease (expired), until ctx
// ends or until. The watches require a leader: a member cut off with a
// minority of the cluster gets an error, not a wait for ever.
func (s *Store) waitLog(ctx context.Context, g string, rev int64, until time.Time) (expired bool, err error) {
	wctx, cancel := context.WithDeadline(withLeader(ctx), until)
	defer cancel()
	logs := s.c.Watch(wctx, g+"l/", clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	leases := s.c.Watch(wctx, g+"s/", clientv3.WithPrefix(), clientv3.WithRev(rev+1), clientv3.WithFilterPut())
	for {
		var wr clientv3.WatchResponse
		var ok bool
		select {
		case wr, ok = <-logs:
		case wr, ok = <-leases:
			if ok && wr.Err() == nil && len(wr.Events) > 0 {
				return true, nil
			}
		}
		switch {
		case !ok:
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			if time.Now().After(until) {
				return false, nil
			}
			return false, fmt.Errorf("the watch ended: %w", wctx.Err())
		case errors.Is(wr.Err(), rpctypes.ErrCompacted):
			return false, nil // read again
		case wr.Err() != nil:
			return false, wr.Err()
		case len(wr.Events) > 0:
			return false, nil
		}
	}
}
