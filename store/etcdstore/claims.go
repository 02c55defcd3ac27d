package etcdstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/herdhq/herd/store"
)

// errNotAlive ends a batch whose session is not alive.
var errNotAlive = errors.New("session not alive")

// ClaimBatch implements store.Store: claimChunk partitions per
// transaction, or batchChunk for a batch of more (parallelChunks at once), each compared with its record as
// read, the records' owners with their liveness as read, and the session
// alive.
func (s *Store) ClaimBatch(ctx context.Context, group, session string, partitions []string) ([]store.ClaimResult, error) {
	const op = "claim batch"
	if err := checkContext(ctx, op); err != nil {
		return nil, err
	}
	if err := store.ValidateClaimBatch(group, session, partitions); err != nil {
		return nil, fmt.Errorf("etcdstore: %s: %w", op, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, failure(op, err)
	}
	results := make([]store.ClaimResult, len(partitions))
	size, inTxn := claimChunk, true // the checkpoints read by the claims' transactions
	if len(partitions) > claimChunk {
		size, inTxn = batchChunk, false
	}
	err := s.inChunks(ctx, s.groupKey(group), len(partitions), size, func(from, to int, later *pendingKeys) error {
		// A transaction may take fewer than the chunk (its compares of
		// the owners it takes over from): the rest is the next one's.
		for n := 0; from < to; from += n {
			var state []*etcdserverpb.ResponseOp
			err := retry(ctx, op, func() (bool, error) {
				var done bool
				var err error
				n, done, err = s.claimChunk(ctx, group, session, partitions[from:to], results[from:to], &state, later, inTxn)
				return done, err
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if errors.Is(err, errNotAlive) {
		return nil, fmt.Errorf("etcdstore: %s: session %q: %w", op, session, store.ErrSessionExpired)
	}
	if err != nil {
		return nil, err
	}
	return results, nil
}

// claimChunk claims partitions in one transaction, deciding on *state (the
// reads of a failed attempt; read first if nil): the first n of them, as
// many as the transaction's compares allow. It reads the checkpoints of
// the claimed ones (only their owner writes them now) in the transaction
// (inTxn), or after it.
func (s *Store) claimChunk(ctx context.Context, group, session string, partitions []string, results []store.ClaimResult, state *[]*etcdserverpb.ResponseOp, later *pendingKeys, inTxn bool) (n int, done bool, err error) {
	const op = "claim batch"
	g := s.groupKey(group)
	gets := []clientv3.Op{clientv3.OpGet(g + "s/" + session), clientv3.OpGet(g + "m/" + session),
		clientv3.OpGet(g+"s/", clientv3.WithPrefix(), clientv3.WithKeysOnly())}
	for _, p := range partitions {
		gets = append(gets, clientv3.OpGet(g+"r/"+p))
	}
	gets = append(gets, clientv3.OpGet(g+"q"))
	rs := *state
	if rs == nil {
		resp, err := s.c.Txn(withLeader(ctx)).Then(gets...).Commit()
		if err != nil {
			return 0, false, failure(op, err)
		}
		rs = resp.Responses
	}
	self, m := rs[0].GetResponseRange().Kvs, rs[1].GetResponseRange().Kvs
	if len(self) == 0 || len(m) == 0 {
		return 0, false, errNotAlive
	}
	var info sessionInfo
	if err := json.Unmarshal(m[0].Value, &info); err != nil {
		return 0, false, fmt.Errorf("etcdstore: %s: session %q: %v: %w", op, session, err, store.ErrCorrupt)
	}
	alive := map[string]bool{}
	for _, kv := range rs[2].GetResponseRange().Kvs {
		alive[strings.TrimPrefix(string(kv.Key), g+"s/")] = true
	}
	w := &write{g: g, group: group, later: later, seq: seqOf(rs[len(rs)-1].GetResponseRange().Kvs)}
	w.alive(session, self[0].CreateRevision)
	dead := map[string]bool{}
	t := now()
	for n = 0; n < len(partitions) && len(w.cmps) < maxOps-2; n++ {
		p := partitions[n]
		results[n] = store.ClaimResult{}
		var cur record
		var rev int64
		if kvs := rs[3+n].GetResponseRange().Kvs; len(kvs) > 0 {
			if cur, err = decodeRecord(kvs[0]); err != nil {
				results[n].Err = fmt.Errorf("etcdstore: claim %q: %w", p, err)
				continue
			}
			rev = kvs[0].ModRevision
		}
		if cur.Session != "" && cur.Session != session && alive[cur.Session] {
			results[n].Err = fmt.Errorf("etcdstore: claim %q: owned by session %q: %w", p, cur.Session, store.ErrClaimed)
			continue
		}
		w.unchanged(g+"r/"+p, rev)
		if cur.Session != "" && cur.Session != session && !dead[cur.Session] {
			dead[cur.Session] = true
			w.dead(cur.Session)
		}
		mark := cur.GivenBack
		if mark == session {
			mark = ""
		}
		nr := record{Session: session, Member: info.Member, Epoch: store.NextEpoch(cur.Epoch, t), GivenBack: mark, Since: t.UnixMicro()}
		w.put(g+"r/"+p, mustJSON(nr))
		if inTxn {
			w.op(clientv3.OpGet(g + "c/" + p))
		}
		w.append(store.Change{Kind: store.Claimed, Partition: p, Session: session, Member: nr.Member, Epoch: nr.Epoch})
		results[n].Ownership = store.Ownership{Partition: p, Session: session, Member: nr.Member, Epoch: nr.Epoch, GivenBack: mark}
	}
	if len(w.log) == 0 {
		return n, true, nil
	}
	ok, fresh, err := s.commitOr(ctx, w, gets)
	if err != nil {
		*state = nil
		return n, false, failure(op, err)
	}
	if !ok {
		*state = fresh
		return n, false, nil
	}
	*state = nil
	if !inTxn {
		return n, true, s.readCheckpoints(ctx, g, results[:n])
	}
	// The checkpoints, read by the transaction after each record's put
	// (only their owner writes them now): the ops are a put and a get
	// for each partition claimed, in the order of results.
	j := 0
	for i := range results[:n] {
		if results[i].Err != nil {
			continue
		}
		if kvs := fresh[2*j+1].GetResponseRange().Kvs; len(kvs) > 0 {
			if _, v, ok := decodeCheckpoint(kvs[0].Value); ok {
				results[i].Ownership.Checkpoint = bytes.Clone(v)
			}
		}
		j++
	}
	return n, true, nil
}

// readCheckpoints reads the checkpoints of the claimed partitions of
// results into their ownerships.
func (s *Store) readCheckpoints(ctx context.Context, g string, results []store.ClaimResult) error {
	var gets []clientv3.Op
	var at []int
	for i, r := range results {
		if r.Err == nil {
			gets = append(gets, clientv3.OpGet(g+"c/"+r.Ownership.Partition))
			at = append(at, i)
		}
	}
	resp, err := s.c.Txn(withLeader(ctx)).Then(gets...).Commit()
	if err != nil {
		return failure("claim batch", err)
	}
	for j, i := range at {
		if kvs := resp.Responses[j].GetResponseRange().Kvs; len(kvs) > 0 {
			if _, v, ok := decodeCheckpoint(kvs[0].Value); ok {
				results[i].Ownership.Checkpoint = bytes.Clone(v)
			}
		}
	}
	return nil
}

// ReleaseBatch implements store.Store.
func (s *Store) ReleaseBatch(ctx context.Context, group, session string, held []store.Ownership) ([]error, error) {
	const op = "release batch"
	if err := checkContext(ctx, op); err != nil {
		return nil, err
	}
	if err := store.ValidateReleaseBatch(group, session, held); err != nil {
		return nil, fmt.Errorf("etcdstore: %s: %w", op, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, failure(op, err)
	}
	errs := make([]error, len(held))
	err := s.inChunks(ctx, s.groupKey(group), len(held), batchChunk, func(from, to int, later *pendingKeys) error {
		var state []*etcdserverpb.ResponseOp
		return retry(ctx, op, func() (bool, error) {
			return s.releaseChunk(ctx, op, group, session, held[from:to], errs[from:to], false, &state, later)
		})
	})
	if err != nil {
		return nil, err
	}
	return errs, nil
}

// GiveBack implements store.Store.
func (s *Store) GiveBack(ctx context.Context, group, partition, session string, epoch uint64) error {
	const op = "give back"
	if err := checkContext(ctx, op); err != nil {
		return err
	}
	if err := store.ValidateGiveBack(group, partition, session, epoch); err != nil {
		return fmt.Errorf("etcdstore: %s: %w", op, err)
	}
	if err := ctx.Err(); err != nil {
		return failure(op, err)
	}
	errs := make([]error, 1)
	held := []store.Ownership{{Partition: partition, Epoch: epoch}}
	var state []*etcdserverpb.ResponseOp
	if err := retry(ctx, op, func() (bool, error) {
		return s.releaseChunk(ctx, op, group, session, held, errs, true, &state, nil)
	}); err != nil {
		return err
	}
	return errs[0]
}

// releaseChunk releases (or gives back) the held records in one
// transaction, deciding on *state as claimChunk does.
func (s *Store) releaseChunk(ctx context.Context, op, group, session string, held []store.Ownership, errs []error, giveBack bool, state *[]*etcdserverpb.ResponseOp, later *pendingKeys) (bool, error) {
	g := s.groupKey(group)
	gets := []clientv3.Op{clientv3.OpGet(g+"s/"+session, clientv3.WithKeysOnly())}
	for _, h := range held {
		gets = append(gets, clientv3.OpGet(g+"r/"+h.Partition))
	}
	gets = append(gets, clientv3.OpGet(g+"q"))
	rs := *state
	if rs == nil {
		resp, err := s.c.Txn(withLeader(ctx)).Then(gets...).Commit()
		if err != nil {
			return false, failure(op, err)
		}
		rs = resp.Responses
	}
	self := rs[0].GetResponseRange().Kvs
	w := &write{g: g, group: group, later: later, seq: seqOf(rs[len(rs)-1].GetResponseRange().Kvs)}
	if len(self) > 0 {
		w.alive(session, self[0].CreateRevision)
	}
	for i, h := range held {
		errs[i] = nil
		kvs := rs[1+i].GetResponseRange().Kvs
		var cur record
		if len(kvs) > 0 {
			var err error
			if cur, err = decodeRecord(kvs[0]); err != nil {
				errs[i] = fmt.Errorf("etcdstore: %s %q: %w", op, h.Partition, err)
				continue
			}
		}
		if len(kvs) == 0 || len(self) == 0 || cur.Epoch != h.Epoch || cur.Session != session {
			errs[i] = fmt.Errorf("etcdstore: %s %q at epoch %d by session %q: %w", op, h.Partition, h.Epoch, session, store.ErrNotOwner)
			continue
		}
		w.unchanged(g+"r/"+h.Partition, kvs[0].ModRevision)
		cur.Session, cur.Member = "", ""
		c := store.Change{Kind: store.Released, Partition: h.Partition, Session: session, Epoch: h.Epoch}
		if giveBack {
			cur.GivenBack, c.GivenBack = session, session
		}
		w.put(g+"r/"+h.Partition, mustJSON(cur))
		w.append(c)
	}
	if len(w.log) == 0 {
		return true, nil
	}
	ok, fresh, err := s.commitOr(ctx, w, gets)
	if err != nil {
		*state = nil
		return false, failure(op, err)
	}
	*state = fresh
	return ok, nil
}

// readRecord reads one partition's record (nil kv if none) and the
// group's sequence.
func (s *Store) readRecord(ctx context.Context, g, partition string) (*mvccpb.KeyValue, record, *seqState, error) {
	resp, err := s.c.Txn(withLeader(ctx)).Then(clientv3.OpGet(g+"r/"+partition), clientv3.OpGet(g+"q")).Commit()
	if err != nil {
		return nil, record{}, nil, err
	}
	seq := seqOf(resp.Responses[1].GetResponseRange().Kvs)
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return nil, record{}, seq, nil
	}
	r, err := decodeRecord(kvs[0])
	return kvs[0], r, seq, err
}
