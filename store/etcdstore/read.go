package etcdstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/herdhq/herd/store"
)

// Snapshot implements store.Store: one transaction of range reads; when it
// finds sessions whose leases are gone, it logs their end and reads again
// (so that the snapshot lists the sessions the log has open).
func (s *Store) Snapshot(ctx context.Context, group string) (*store.Snapshot, error) {
	const op = "snapshot"
	if err := checkContext(ctx, op); err != nil {
		return nil, err
	}
	if err := store.ValidateGroup(group); err != nil {
		return nil, fmt.Errorf("etcdstore: %s: %w", op, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, failure(op, err)
	}
	g := s.groupKey(group)
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if _, err := s.expireDue(ctx, op, group); err != nil {
				return nil, err
			}
		}
		resp, err := s.c.Txn(withLeader(ctx)).Then(clientv3.OpGet(g+"q"), clientv3.OpGet(g+"k"),
			clientv3.OpGet(g+"m/", clientv3.WithPrefix()), clientv3.OpGet(g+"s/", clientv3.WithPrefix(), clientv3.WithKeysOnly()),
			clientv3.OpGet(g+"r/", clientv3.WithPrefix()), clientv3.OpGet(g+"p/", clientv3.WithPrefix()), pendingGet(g),
			clientv3.OpGet(g+"o/", clientv3.WithPrefix())).Commit()
		if err != nil {
			return nil, failure(op, err)
		}
		snap, leases, dead, err := s.buildSnapshot(ctx, g, resp.Responses, resp.Header.Revision)
		switch {
		case errors.Is(err, errCompacted):
			continue // the pending entries' read was compacted: read again
		case errors.Is(err, store.ErrCorrupt):
			return nil, fmt.Errorf("etcdstore: %s: %w", op, err)
		case err != nil:
			return nil, failure(op, err)
		}
		if dead && attempt < 4 {
			continue // a lease ended: log it first
		}
		if err := s.remaining(ctx, snap.Sessions, leases); err != nil {
			return nil, failure(op, err)
		}
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			s.setHint(g, logHint{rev: resp.Header.Revision, create: kvs[0].CreateRevision, at: snap.Version, head: true})
		}
		return snap, nil
	}
}

// remaining sets each live session's Remaining from its lease, one
// LeaseTimeToLive each (at most 64 at once: a fleet's in one or two round
// trips). etcd gives whole seconds,
// rounded down: Remaining is at most the time left, at least 1 ms, and
// at most the session's TTL.
func (s *Store) remaining(ctx context.Context, sessions []store.SessionInfo, leases []clientv3.LeaseID) error {
	sem := make(chan struct{}, 64)
	errs := make(chan error, len(sessions))
	var wg sync.WaitGroup
	for i := range sessions {
		if leases[i] == 0 {
			continue
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			resp, err := s.c.TimeToLive(withLeader(ctx), leases[i])
			if err != nil {
				errs <- err
				return
			}
			sessions[i].Remaining = min(max(time.Duration(resp.TTL)*time.Second, time.Millisecond), sessions[i].Remaining)
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// buildSnapshot decodes the reads of Snapshot, with the lease of each live
// session (0 for one whose lease is gone); dead reports a logged session
// whose lease is gone (listed, as the log has it open).
func (s *Store) buildSnapshot(ctx context.Context, g string, rs []*etcdserverpb.ResponseOp, rev int64) (snap *store.Snapshot, leases []clientv3.LeaseID, dead bool, err error) {
	seq, err := decodeSeq(rs[0].GetResponseRange().Kvs)
	if err != nil {
		return nil, nil, false, err
	}
	// The pending entries are the log's last: the version is after them.
	t, err := s.tailOf(ctx, g, seq, rs[6].GetResponseRange().Kvs, rev, true, nil)
	if err != nil {
		return nil, nil, false, err
	}
	snap = &store.Snapshot{Version: t.head}
	var m meta
	if kvs := rs[1].GetResponseRange().Kvs; len(kvs) > 0 {
		if err := json.Unmarshal(kvs[0].Value, &m); err != nil {
			return nil, nil, false, fmt.Errorf("the group's partition set record cannot be decoded: %v: %w", err, store.ErrCorrupt)
		}
	}
	snap.Kind, snap.PartitionSetStored = m.Kind, m.Stored
	alive := map[string]bool{}
	for _, kv := range rs[3].GetResponseRange().Kvs {
		alive[strings.TrimPrefix(string(kv.Key), g+"s/")] = true
	}
	for _, kv := range rs[2].GetResponseRange().Kvs {
		id := strings.TrimPrefix(string(kv.Key), g+"m/")
		info, err := sessionOf(id, kv)
		if err != nil {
			snap.Malformed = append(snap.Malformed, store.Malformed{Kind: store.MalformedSession, ID: id, Reason: err.Error()})
			continue
		}
		remaining, lease := info.TTL, info.Lease
		if !alive[id] {
			dead, remaining, lease = true, time.Nanosecond, 0
		}
		leases = append(leases, lease)
		snap.Sessions = append(snap.Sessions, store.SessionInfo{ID: id, Member: info.Member, Remaining: remaining, Weight: info.Weight})
	}
	for _, kv := range rs[4].GetResponseRange().Kvs {
		id := strings.TrimPrefix(string(kv.Key), g+"r/")
		o, err := ownerOf(id, kv)
		if err != nil {
			snap.Malformed = append(snap.Malformed, store.Malformed{Kind: store.MalformedOwnership, ID: id, Reason: err.Error()})
			continue
		}
		snap.Owners = append(snap.Owners, o)
	}
	for _, kv := range rs[7].GetResponseRange().Kvs {
		// A load that does not decode (written by hand) is left out.
		if l, err := store.ParseLoad(string(kv.Value)); err == nil {
			snap.Loads = append(snap.Loads, store.Load{Partition: strings.TrimPrefix(string(kv.Key), g+"o/"), Load: l})
		}
	}
	if m.Stored {
		var chunks []*mvccpb.KeyValue
		for _, kv := range rs[5].GetResponseRange().Kvs {
			if hasPrefix(kv.Key, setPrefix(g, m.Set)) {
				chunks = append(chunks, kv)
			}
		}
		if len(chunks) != m.Chunks {
			return nil, nil, false, fmt.Errorf("the group's partition set has %d chunks of %d: %w", len(chunks), m.Chunks, store.ErrCorrupt)
		}
		var bad []store.Malformed
		if snap.Partitions, bad, err = decodeSet(chunks); err != nil {
			return nil, nil, false, err
		}
		snap.Malformed = append(snap.Malformed, bad...)
	}
	store.SortMalformed(snap.Malformed)
	return snap, leases, dead, nil
}

// Records implements store.Store: readChunk partitions per read, every
// read at the revision of the first.
func (s *Store) Records(ctx context.Context, group string, partitions []string) ([]store.Record, error) {
	const op = "records"
	if err := checkContext(ctx, op); err != nil {
		return nil, err
	}
	if err := store.ValidateRecords(group, partitions); err != nil {
		return nil, fmt.Errorf("etcdstore: %s: %w", op, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, failure(op, err)
	}
	g := s.groupKey(group)
	var out []store.Record
	var rev int64
	t := now()
	for from := 0; from < len(partitions); from += readChunk {
		part := partitions[from:min(from+readChunk, len(partitions))]
		var gets []clientv3.Op
		for _, p := range part {
			gets = append(gets, clientv3.OpGet(g+"r/"+p, clientv3.WithRev(rev)), clientv3.OpGet(g+"c/"+p, clientv3.WithRev(rev)))
		}
		resp, err := s.c.Txn(withLeader(ctx)).Then(gets...).Commit()
		if err != nil {
			return nil, failure(op, err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for i, p := range part {
			kvs := resp.Responses[2*i].GetResponseRange().Kvs
			if len(kvs) == 0 {
				continue
			}
			r, err := decodeRecord(kvs[0])
			o, oerr := ownerOf(p, kvs[0])
			if err != nil || oerr != nil {
				continue // Snapshot lists it in Malformed
			}
			rec := store.Record{Ownership: o}
			if r.Since != 0 {
				rec.Since = max(t.Sub(time.UnixMicro(r.Since)), 0)
			}
			if c := resp.Responses[2*i+1].GetResponseRange().Kvs; len(c) > 0 {
				if at, v, ok := decodeCheckpoint(c[0].Value); ok {
					rec.Checkpoint, rec.CheckpointAge = v, max(t.Sub(at), 1)
				}
			}
			out = append(out, rec)
		}
	}
	return out, nil
}

// Groups implements store.GroupLister.
func (s *Store) Groups(ctx context.Context) ([]string, error) {
	const op = "groups"
	if err := checkContext(ctx, op); err != nil {
		return nil, err
	}
	resp, err := s.c.Get(withLeader(ctx), s.prefix+"i/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, failure(op, err)
	}
	var out []string
	for _, kv := range resp.Kvs {
		g, err := url.PathUnescape(strings.TrimPrefix(string(kv.Key), s.prefix+"i/"))
		if err != nil || store.ValidateGroup(g) != nil {
			continue
		}
		out = append(out, g)
	}
	slices.Sort(out)
	return out, nil
}
