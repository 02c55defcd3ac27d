package etcdstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/herdhq/herd/store"
)

// The group's log is gap-free and in the order of the changes, per group,
// without making the group's writers take turns: a change writes its
// entries into a pending key u/<random> of its own (no write compares
// anything the others write), and the pending keys are the log's last
// entries, in the order of their revisions (the order of the changes),
// after the sequenced ones (l/, up to q's seq). Their seqs and tags follow
// from q and their contents, so every reader numbers them alike, and so
// does the writer that sequences them: it moves the pending keys it read
// into one l/ key, with q, in a transaction that compares q (writers that
// sequence at once contend, and the loser finds its entries sequenced by
// the winner, who took every pending key it read). The store of a writer
// sequences its key in the background after the write (seqlater.go); one
// left pending (its store closed or failed before) is sequenced by the
// next writer.

// seqKeys bounds the pending keys one sequencing takes: a delete and a
// put each.
const seqKeys = 60

// logTail is the group's log as a read finds it: q, and the pending
// entries after it, tagged.
type logTail struct {
	seq  seqState
	keys []*mvccpb.KeyValue // the pending keys, in revision order
	// entries are the pending entries as the log holds them once
	// sequenced (JSON, with their tags), seq.Seq+1 onwards.
	entries []json.RawMessage
	tags    []uint64      // their tags
	sizes   []int         // the number of entries of each key
	head    store.Version // the version after the last entry
}

// tailOf numbers and tags the pending keys kvs (read at rev, keys only,
// in revision order) after the sequence seq, values being the values of
// some of them read with them (nil: none). Every reader of the group
// does it on every read while entries are pending: the store keeps each
// key's entries (a pending key is written once), tagged after the tag
// before it, and reads only the values of the keys it has not seen. all
// says that kvs are all the group's pending keys: the store forgets the
// others it kept (sequenced since).
func (s *Store) tailOf(ctx context.Context, g string, seq seqState, kvs []*mvccpb.KeyValue, rev int64, all bool, values map[string][]byte) (logTail, error) {
	t := logTail{seq: seq, keys: kvs, head: seq.version()}
	if len(kvs) > 0 && !seq.exists {
		return t, fmt.Errorf("the group has pending log entries and no sequence: %w", store.ErrCorrupt)
	}
	values, err := s.unseen(ctx, g, kvs, rev, false, values)
	if err != nil {
		return t, err
	}
	s.tails.mu.Lock()
	if s.uncachedLocked(kvs, values) {
		// Another read of the store dropped keys from the cache since
		// unseen looked (its listing, later, no longer had them, or the
		// cache was full): read every key's value at rev.
		s.tails.mu.Unlock()
		if values, err = s.unseen(ctx, g, kvs, rev, true, nil); err != nil {
			return t, err
		}
		s.tails.mu.Lock()
	}
	defer s.tails.mu.Unlock()
	if s.tails.m == nil || len(s.tails.m) > maxCachedTails {
		s.tails.m = map[string]tagged{}
	}
	if all {
		listed := make(map[string]bool, len(kvs))
		for _, kv := range kvs {
			listed[string(kv.Key)] = true
		}
		for k := range s.tails.m {
			if strings.HasPrefix(k, g) && !listed[k] {
				delete(s.tails.m, k)
			}
		}
	}
	for _, kv := range kvs {
		c, ok := s.tails.m[string(kv.Key)]
		if !ok || c.rev != kv.ModRevision {
			v, ok := values[string(kv.Key)]
			if !ok {
				return t, fmt.Errorf("pending log key %q is gone at the revision it was listed at: %w", kv.Key, store.ErrCorrupt)
			}
			if c.raw, err = pendingEntries(kv.Key, v); err != nil {
				return t, err
			}
			c.rev, c.entries = kv.ModRevision, nil
		}
		if c.entries == nil || c.prev != t.head.Tag {
			c.prev, c.last, c.entries, c.tags = t.head.Tag, t.head.Tag, nil, nil
			for _, e := range c.raw {
				var v json.RawMessage
				v, c.last = chain(c.last, e)
				c.entries, c.tags = append(c.entries, v), append(c.tags, c.last)
			}
		}
		s.tails.m[string(kv.Key)] = c
		t.entries, t.tags = append(t.entries, c.entries...), append(t.tags, c.tags...)
		t.sizes = append(t.sizes, len(c.entries))
		t.head = store.Version{Seq: t.head.Seq + uint64(len(c.entries)), Tag: c.last}
	}
	return t, nil
}

// uncachedLocked reports whether a key of kvs is neither in the cache (at
// its revision) nor in values. s.tails.mu is held.
func (s *Store) uncachedLocked(kvs []*mvccpb.KeyValue, values map[string][]byte) bool {
	for _, kv := range kvs {
		if c, ok := s.tails.m[string(kv.Key)]; !ok || c.rev != kv.ModRevision {
			if _, ok := values[string(kv.Key)]; !ok {
				return true
			}
		}
	}
	return false
}

// unseen reads the values of the pending keys of kvs the store has not
// decoded (every one of them: every), at rev, but for those of read (values
// read with kvs), which it returns with them.
func (s *Store) unseen(ctx context.Context, g string, kvs []*mvccpb.KeyValue, rev int64, every bool, read map[string][]byte) (map[string][]byte, error) {
	var from int64
	s.tails.mu.Lock()
	for _, kv := range kvs {
		if _, ok := read[string(kv.Key)]; ok {
			continue
		}
		if c, ok := s.tails.m[string(kv.Key)]; (every || !ok || c.rev != kv.ModRevision) && (from == 0 || kv.ModRevision < from) {
			from = kv.ModRevision
		}
	}
	s.tails.mu.Unlock()
	if from == 0 {
		return read, nil
	}
	resp, err := s.c.Get(withLeader(ctx), g+"u/", clientv3.WithPrefix(), clientv3.WithRev(rev), clientv3.WithMinModRev(from))
	if errors.Is(err, rpctypes.ErrCompacted) {
		return nil, errCompacted
	}
	if err != nil {
		return nil, err
	}
	values := valuesOf(resp.Kvs)
	for k, v := range read {
		values[k] = v
	}
	return values, nil
}

// maxCachedTails bounds the pending keys whose tagged entries a store
// keeps (see tailOf); past it, it starts again.
const maxCachedTails = 4096

// tails are the tagged entries of pending keys, by key.
type tails struct {
	mu sync.Mutex
	m  map[string]tagged
}

// tagged is a pending key's entries (raw, as written), and tagged after
// prev (last: the last one's tag); rev is the key's revision.
type tagged struct {
	rev     int64
	raw     []json.RawMessage
	prev    uint64
	last    uint64
	entries []json.RawMessage
	tags    []uint64
}

// tagAt is the tag of the entry at seq, which is at or after the
// sequence's (seq.Seq <= at <= head.Seq).
func (t logTail) tagAt(at uint64) uint64 {
	if at == t.seq.Seq {
		return t.seq.Tag
	}
	return t.tags[at-t.seq.Seq-1]
}

// sequence moves the pending keys into the log until none of own is
// pending, starting from rs, the reads of q and the pending keys
// (pendingGet) at rev (nil: read them). It gives up quietly: an entry
// left pending is in the log all the same, and the next writer sequences
// it.
func (s *Store) sequence(ctx context.Context, g string, own []string, rs []*etcdserverpb.ResponseOp, rev int64) {
	if s.beforeSequence != nil {
		s.beforeSequence()
	}
	for attempt := 0; attempt < 8 && ctx.Err() == nil; attempt, rs = attempt+1, nil {
		if rs == nil {
			resp, err := s.c.Txn(withLeader(ctx)).Then(clientv3.OpGet(g+"q"), pendingGet(g)).Commit()
			if err != nil {
				return
			}
			rs, rev = resp.Responses, resp.Header.Revision
		}
		seq, err := decodeSeq(rs[0].GetResponseRange().Kvs)
		kvs := rs[1].GetResponseRange().Kvs
		at := pendingIndex(kvs, own)
		if err != nil || !seq.exists || at < 0 {
			return
		}
		t, err := s.tailOf(ctx, g, seq, kvs[:min(len(kvs), seqKeys)], rev, false, nil)
		if err != nil {
			return
		}
		// One sequenced key per pending key: a reader re-reads the key
		// holding its version (for its tag), which stays small.
		var ops []clientv3.Op
		end, i, size := seq.Seq, 0, 0
		tag := seq.Tag
		n := 0
		for ; n < len(t.sizes); n++ {
			es := t.entries[i : i+t.sizes[n]]
			v := joinJSON(es)
			if n > 0 && size+len(v) > requestBytes/2 {
				break
			}
			size += len(v)
			i += len(es)
			end, tag = end+uint64(len(es)), t.tags[i-1]
			ops = append(ops, clientv3.OpPut(logKey(g, end), string(v)), clientv3.OpDelete(string(kvs[n].Key)))
		}
		ops = append(ops, clientv3.OpPut(g+"q", mustJSON(seqState{Seq: end, Tag: tag})))
		ops = append(ops, s.trim(g, seq.Seq, end)...)
		resp, err := s.c.Txn(withLeader(ctx)).If(clientv3.Compare(clientv3.ModRevision(g+"q"), "=", seq.rev)).
			Then(ops...).Commit()
		if err != nil || resp.Succeeded && at < n {
			return
		}
		// Another writer sequenced first, or more of own is left.
	}
}

// pendingIndex is the last index of a key of own in kvs, -1 if none is
// there.
func pendingIndex(kvs []*mvccpb.KeyValue, own []string) int {
	for i := len(kvs) - 1; i >= 0; i-- {
		if slices.Contains(own, string(kvs[i].Key)) {
			return i
		}
	}
	return -1
}
