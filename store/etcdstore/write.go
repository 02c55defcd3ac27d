package etcdstore

import (
	"context"
	"encoding/json"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/herdhq/herd/store"
)

// write is one transaction that changes a group and logs it: the compares
// of what its decision read, its operations, and the entries to append.
// commit adds the sequence: a compare of its revision as read, the
// entries in one key under the last one's seq, and the new sequence, so
// that the log is gap-free and in the order of the changes.
type write struct {
	g     string // the group's key prefix
	group string
	seq   seqState
	cmps  []clientv3.Cmp
	ops   []clientv3.Op
	log   []store.Change
	// setID and setChunks name the set of a PartitionsSet entry.
	setID     string
	setChunks int
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
// decides on is as fresh as can be).
func (s *Store) commitOr(ctx context.Context, w *write, reads []clientv3.Op) (committed bool, state []*etcdserverpb.ResponseOp, err error) {
	ops := w.ops
	cmps := append(w.cmps, clientv3.Compare(clientv3.ModRevision(w.g+"q"), "=", w.seq.rev))
	if len(w.log) > 0 {
		seq, tag := w.seq.Seq, w.seq.Tag
		if !w.seq.exists {
			seq, tag = 0, newTag() // a new history of the group
		}
		first := seq + 1
		es := make([]json.RawMessage, 0, len(w.log))
		for _, c := range w.log {
			var v string
			e := entryOf(c)
			if c.Kind == store.PartitionsSet {
				e.Set, e.Chunks = w.setID, w.setChunks
			}
			v, tag = chain(tag, e)
			es = append(es, json.RawMessage(v))
			seq++
		}
		// One key for the transaction's entries, named by the last one's
		// seq: the key holding seq N is the first at or after l/N.
		ops = append(ops, clientv3.OpPut(logKey(w.g, seq), mustJSON(es)))
		ops = append(ops, clientv3.OpPut(w.g+"q", mustJSON(seqState{Seq: seq, Tag: tag})),
			clientv3.OpPut(s.indexKey(w.group), ""))
		// Trim the log once every 256 entries, to the last logLimit.
		if seq/256 != (first-1)/256 && seq > uint64(s.logLimit) {
			ops = append(ops, clientv3.OpDelete(logKey(w.g, 0), clientv3.WithRange(logKey(w.g, seq-uint64(s.logLimit)+1))))
		}
	}
	resp, err := s.c.Txn(withLeader(ctx)).If(cmps...).Then(ops...).Else(reads...).Commit()
	if err != nil {
		return false, nil, err
	}
	if resp.Succeeded {
		return true, nil, nil
	}
	return false, resp.Responses, nil
}
