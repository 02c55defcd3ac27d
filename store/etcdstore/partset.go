package etcdstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/herdhq/herd/store"
)

// inlineBytes is the largest set a PartitionsSet entry carries itself; a
// larger one is named by the entry, and a reader of the entry after the
// set was replaced (and deleted) takes a new snapshot.
const inlineBytes = 64 << 10

// chunkBytes is the size of one chunk of a partition set: a 100,000-id set
// is a few dozen of them.
const chunkBytes = 256 << 10

// SetPartitions implements store.Store. The set is kept in chunks under an
// id of its own (p/<set>/<n>); the group's record (k) names the current
// set and its digest. A set that fits one transaction is written with the
// record; a larger one is written chunk by chunk first, and the record
// then switches to it in a transaction that compares the record as read.
// A PartitionsSet entry carries a small set and names a large one; the previous set is deleted, so
// a reader of an entry that names it takes a new snapshot.
func (s *Store) SetPartitions(ctx context.Context, group string, set store.PartitionSet) (store.SetResult, error) {
	const op = "set partitions"
	if err := checkContext(ctx, op); err != nil {
		return store.SetResult{}, err
	}
	if err := store.ValidateSetPartitions(group, set); err != nil {
		return store.SetResult{}, fmt.Errorf("etcdstore: %s: %w", op, err)
	}
	if err := ctx.Err(); err != nil {
		return store.SetResult{}, failure(op, err)
	}
	g := s.groupKey(group)
	var digest string
	var sorted []store.Partition
	var chunks []string
	if set.Mode != store.SetKindOnly {
		digest = store.Digest(set.Partitions)
		sorted = slices.Clone(set.Partitions)
		slices.SortFunc(sorted, func(a, b store.Partition) int { return strings.Compare(a.ID, b.ID) })
		chunks = chunkSet(sorted, chunkBytes)
	}
	id := fmt.Sprintf("%016x", newTag())
	prewritten := false
	var res store.SetResult
	err := retry(ctx, op, func() (bool, error) {
		resp, err := s.c.Txn(withLeader(ctx)).Then(clientv3.OpGet(g+"k"), clientv3.OpGet(g+"q")).Commit()
		if err != nil {
			return false, failure(op, err)
		}
		var m meta
		var rev int64
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			if err := json.Unmarshal(kvs[0].Value, &m); err != nil {
				return false, fmt.Errorf("etcdstore: %s: the group's partition set record: %v: %w", op, err, store.ErrCorrupt)
			}
			rev = kvs[0].ModRevision
		}
		doWrite, r, err := store.DecideSet(group, store.GroupSet{Kind: m.Kind, Stored: m.Stored, Digest: m.Digest}, set, digest)
		res = r
		if err != nil {
			return false, fmt.Errorf("etcdstore: %s: %w", op, err)
		}
		if !doWrite && r.Kind == m.Kind {
			return true, nil
		}
		w := &write{g: g, group: group, seq: seqOf(resp.Responses[1].GetResponseRange().Kvs)}
		w.unchanged(g+"k", rev)
		old := m
		m.Kind = r.Kind
		if doWrite {
			if len(chunks) > 1 && !prewritten {
				if err := s.prewrite(ctx, g, id, chunks); err != nil {
					return false, failure(op, err)
				}
				prewritten = true
			}
			if !prewritten {
				w.put(chunkKey(g, id, 0), chunks[0])
			}
			m.Stored, m.Digest, m.Set, m.Chunks = true, digest, id, len(chunks)
			if old.Set != "" {
				w.op(clientv3.OpDelete(setPrefix(g, old.Set), clientv3.WithPrefix()))
			}
			w.append(store.Change{Kind: store.PartitionsSet, Partitions: sorted})
		} else {
			w.put(s.indexKey(group), "")
		}
		w.put(g+"k", mustJSON(m))
		ok, err := s.commitSet(ctx, w, id, chunks)
		if err != nil {
			return false, failure(op, err)
		}
		return ok, nil
	})
	if prewritten && (err != nil || !res.Written) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), requestTimeout)
		defer cancel()
		_, _ = s.c.Delete(ctx, setPrefix(g, id), clientv3.WithPrefix())
	}
	return res, err
}

// prewrite writes the chunks of a large set, one per request.
func (s *Store) prewrite(ctx context.Context, g, id string, chunks []string) error {
	for i, c := range chunks {
		if _, err := s.c.Put(withLeader(ctx), chunkKey(g, id, i), c); err != nil {
			return err
		}
	}
	return nil
}

// commitSet is commit for SetPartitions: its PartitionsSet entry names the
// set's chunks.
func (s *Store) commitSet(ctx context.Context, w *write, id string, chunks []string) (bool, error) {
	if len(w.log) == 1 && (len(chunks) > 1 || len(chunks[0]) > inlineBytes) {
		w.log[0].Partitions = nil
		w.setID, w.setChunks = id, len(chunks)
	}
	return s.commit(ctx, w)
}
