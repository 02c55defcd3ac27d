package etcdstore

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/herdhq/herd/store"
)

// write is one transaction that changes a group and logs it: the compares
// of what its decision read, its operations, and the entries to append.
// commit adds the entries as one pending key (see pending.go): writes of
// one group compare only what their decisions read, so writers of
// different partitions never make each other retry.
type write struct {
	g     string // the group's key prefix
	group string
	cmps  []clientv3.Cmp
	ops   []clientv3.Op
	log   []store.Change
	// setID and setChunks name the set of a PartitionsSet entry.
	setID     string
	setChunks int
	// seq is the group's sequence as the decision read it (nil: not
	// read): if it is unchanged and no entry is pending, the entries go
	// into the log at once.
	seq *seqState
	// later, if set, collects the write's pending key for its caller to
	// sequence once for all its transactions; else commit sequences it.
	later *pendingKeys
}

// pendingKeys are the pending keys a call wrote.
type pendingKeys struct {
	mu   sync.Mutex
	keys []string
}

func (p *pendingKeys) add(k string) {
	p.mu.Lock()
	p.keys = append(p.keys, k)
	p.mu.Unlock()
}

func (w *write) cmp(c clientv3.Cmp)    { w.cmps = append(w.cmps, c) }
func (w *write) op(o clientv3.Op)      { w.ops = append(w.ops, o) }
func (w *write) append(c store.Change) { w.log = append(w.log, c) }
func (w *write) put(k, v string)       { w.op(clientv3.OpPut(k, v)) }
func (w *write) unchanged(k string, rev int64) {
	w.cmp(clientv3.Compare(clientv3.ModRevision(k), "=", rev))
}

// alive compares that the session's liveness key is the one read (rev is
// its create revision), so the session is alive when the write commits.
func (w *write) alive(session string, rev int64) {
	w.cmp(clientv3.Compare(clientv3.CreateRevision(w.g+"s/"+session), "=", rev))
}

// dead compares that session has no liveness key.
func (w *write) dead(session string) {
	w.cmp(clientv3.Compare(clientv3.CreateRevision(w.g+"s/"+session), "=", 0))
}

// commit runs the write: committed is false if something it compares
// changed since it was read (the caller reads and decides again).
func (s *Store) commit(ctx context.Context, w *write) (committed bool, err error) {
	ok, _, err := s.commitOr(ctx, w, nil)
	return ok, err
}

// commitOr is commit that, when a compare fails, runs reads instead and
// returns their responses: the state the caller decides again on, without
// a read of its own (a retry costs one round trip, and the state it
// decides on is as fresh as can be). When it commits, it returns the
// responses of w.ops.
//
// The entries are logged in the same transaction as the change. If the
// group's sequence q is as the decision read it (w.seq) and no entry is
// pending, they go into the log at once (l/, and q); else into one
// pending key u/<random> (creating q, with the random tag before the
// first entry of a new history, if there is none), which the store then
// sequences in the background (see seqlater.go). Readers see pending entries as the log's
// last ones, in the order of their revisions, from the moment the write
// commits.
func (s *Store) commitOr(ctx context.Context, w *write, reads []clientv3.Op) (committed bool, state []*etcdserverpb.ResponseOp, err error) {
	ops := w.ops[:len(w.ops):len(w.ops)]
	var own string
	if len(w.log) > 0 {
		raws := make([][]byte, 0, len(w.log))
		at := time.Now() // the entries' time: this process's clock (etcd has no server time to give)
		for _, c := range w.log {
			e := entryOf(c, at)
			if c.Kind == store.PartitionsSet {
				e.Set, e.Chunks = w.setID, w.setChunks
			}
			raws = append(raws, []byte(mustJSON(e)))
		}
		own = fmt.Sprintf("%su/%016x", w.g, rand.Uint64())
		newHistory := clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(w.g+"q"), "=", 0)},
			[]clientv3.Op{clientv3.OpPut(w.g+"q", mustJSON(seqState{Tag: newTag()}))}, nil)
		pending := []clientv3.Op{clientv3.OpPut(own, string(joinJSON(raws))), newHistory}
		ops = append(ops, clientv3.OpPut(s.indexKey(w.group), ""))
		if w.seq != nil {
			ops = append(ops, clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(w.g+"q"), "=", w.seq.rev),
				clientv3.Compare(clientv3.CreateRevision(w.g+"u/"), "=", 0).WithPrefix()}, s.direct(w.g, *w.seq, raws), pending))
		} else {
			ops = append(ops, pending...)
		}
		if w.later == nil {
			ops = append(ops, clientv3.OpGet(w.g+"q"), pendingGet(w.g))
		}
	}
	resp, err := s.c.Txn(withLeader(ctx)).If(w.cmps...).Then(ops...).Else(reads...).Commit()
	if err != nil {
		return false, nil, err
	}
	if !resp.Succeeded {
		s.conflicts.Add(1)
		return false, resp.Responses, nil
	}
	done := resp.Responses[:len(w.ops)]
	if own == "" || w.seq != nil && resp.Responses[len(w.ops)+1].GetResponseTxn().Succeeded {
		return true, done, nil // logged at once
	}
	if w.later != nil {
		w.later.add(own)
		return true, done, nil
	}
	n := len(resp.Responses)
	s.sequenceLater(w.g, []string{own}, resp.Responses[n-2:], resp.Header.Revision)
	return true, done, nil
}

// direct is the operations that append the entries raws (untagged) to the
// log after seq at once: one key, and q.
func (s *Store) direct(g string, seq seqState, raws [][]byte) []clientv3.Op {
	last, tag := seq.Seq, seq.Tag
	if !seq.exists {
		last, tag = 0, newTag() // a new history of the group
	}
	tagged := make([][]byte, len(raws))
	for i, e := range raws {
		tagged[i], tag = chain(tag, e)
	}
	last += uint64(len(raws))
	ops := []clientv3.Op{clientv3.OpPut(logKey(g, last), string(joinJSON(tagged))), clientv3.OpPut(g+"q", mustJSON(seqState{Seq: last, Tag: tag}))}
	return append(ops, s.trim(g, seq.Seq, last)...)
}

// trim deletes the entries before the last logLimit, once every 256
// entries: when the log goes from seq from to seq to.
func (s *Store) trim(g string, from, to uint64) []clientv3.Op {
	if to/256 == from/256 || to <= uint64(s.logLimit) {
		return nil
	}
	return []clientv3.Op{clientv3.OpDelete(logKey(g, 0), clientv3.WithRange(logKey(g, to-uint64(s.logLimit)+1)))}
}

// joinJSON is the JSON array of the JSON values vs.
func joinJSON[T ~[]byte](vs []T) []byte {
	n := 2
	for _, v := range vs {
		n += len(v) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, '[')
	for i, v := range vs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, v...)
	}
	return append(b, ']')
}

// pendingGet lists the group's pending keys (keys only: tailOf reads the
// values it has not seen) in the order of their revisions (the order of
// their entries in the log).
func pendingGet(g string) clientv3.Op {
	return clientv3.OpGet(g+"u/", clientv3.WithPrefix(), clientv3.WithKeysOnly(),
		clientv3.WithSort(clientv3.SortByModRevision, clientv3.SortAscend))
}

// pendingEntries splits a pending key into its entries (JSON objects).
func pendingEntries(key, v []byte) ([]json.RawMessage, error) {
	es, err := splitEntries(v)
	for _, e := range es {
		if err == nil && (len(e) < 2 || e[0] != '{' || e[len(e)-1] != '}') {
			err = fmt.Errorf("entry %.40q is not an object", e)
		}
	}
	if err != nil || len(es) == 0 {
		return nil, fmt.Errorf("pending log key %q cannot be decoded: %v: %w", key, err, store.ErrCorrupt)
	}
	return es, nil
}
