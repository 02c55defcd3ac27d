package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/herdhq/herd/store"
)

// logHint is what the store's last read of a group's log (readLog, or a
// Snapshot) found: its revision, q's create revision (a new history
// creates q anew), and the version it left its reader at. The next read of a reader at that
// version reads only the pending keys written after that revision and the
// sequenced keys after that version: the entry at it is in the log with
// its tag as long as q was not created anew (the log's entries keep their
// seqs and tags once read, pending or sequenced). A member follows the
// log in one transaction per read instead of two or three (a read of the
// sequenced keys, one of the new pending keys' values): on the fleet
// bench's 10 to 20 on 1,024, about 400 of about 1,300 calls to etcd.
type logHint struct {
	rev    int64
	create int64
	at     store.Version
	head   bool // at is the log's head at rev: the reader read every entry
}

// logHints are the store's hints, by group key.
type logHints struct {
	mu sync.Mutex
	m  map[string]logHint
}

// maxHints bounds the groups whose hints a store keeps; past it, it
// starts again.
const maxHints = 1024

func (s *Store) hintOf(g string) (logHint, bool) {
	s.hints.mu.Lock()
	defer s.hints.mu.Unlock()
	h, ok := s.hints.m[g]
	return h, ok
}

func (s *Store) setHint(g string, h logHint) {
	s.hints.mu.Lock()
	defer s.hints.mu.Unlock()
	if s.hints.m == nil || len(s.hints.m) >= maxHints {
		s.hints.m = map[string]logHint{}
	}
	s.hints.m[g] = h
}

// valuesOf is the values of kvs by key.
func valuesOf(kvs []*mvccpb.KeyValue) map[string][]byte {
	values := make(map[string][]byte, len(kvs))
	for _, kv := range kvs {
		values[string(kv.Key)] = kv.Value
	}
	return values
}

// sequencedKeys reads the sequenced keys from the one holding after's
// entry (at most limit+1 of them) at revision rev.
func (s *Store) sequencedKeys(ctx context.Context, g string, after store.Version, limit int, rev int64) ([]*mvccpb.KeyValue, error) {
	resp, err := s.c.Get(withLeader(ctx), logKey(g, max(after.Seq, 1)), clientv3.WithRange(g+"l0"),
		clientv3.WithLimit(int64(limit)+1), clientv3.WithRev(rev))
	if errors.Is(err, rpctypes.ErrCompacted) {
		return nil, errCompacted
	}
	if err != nil {
		return nil, err
	}
	return resp.Kvs, nil
}

// sequencedEntries decodes the entries after after (at most max) from the
// sequenced keys kvs, read at revision rev from the one holding after's
// entry, up to the sequence's seq last; or, if past, from the key after
// it, after's entry being known to be in the log (logHint).
func (s *Store) sequencedEntries(ctx context.Context, g string, after store.Version, max int, rev int64, last uint64, kvs []*mvccpb.KeyValue, past bool) ([]store.Change, error) {
	cs := make([]store.Change, 0, min(max, int(last-after.Seq)))
	next := after.Seq // the seq of the entry the reader expects next
	for _, kv := range kvs {
		es, first, err := logKeyEntries(g, kv, last)
		if err != nil {
			return nil, err
		}
		if next == after.Seq {
			switch {
			case past && first == after.Seq+1:
				// after's entry ends the key before this one.
				next = first
			case first > after.Seq:
				return nil, errGone // trimmed
			case es[after.Seq-first].Tag != after.Tag:
				// The key holding the reader's entry: its tag must be the reader's.
				return nil, errGone
			default:
				es, first, next = es[after.Seq-first+1:], after.Seq+1, after.Seq+1
			}
		}
		if first != next {
			return nil, fmt.Errorf("the log has a gap before %q: %w", kv.Key, store.ErrCorrupt)
		}
		for _, e := range es {
			if len(cs) == max {
				return cs, nil
			}
			c, err := s.changeOf(ctx, g, e, rev)
			if err != nil {
				return nil, err
			}
			c.Version.Seq = next
			next++
			cs = append(cs, c)
		}
	}
	switch {
	case next == after.Seq:
		return nil, errGone // trimmed
	case len(cs) < max && next != last+1:
		return nil, fmt.Errorf("the log ends at %d before its sequence %d: %w", next-1, last, store.ErrCorrupt)
	}
	return cs, nil
}
