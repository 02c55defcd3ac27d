package etcdstore

import (
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/herdhq/herd/store"
)

// Checkpoint implements store.Store: a read of the record, then a
// transaction that writes the checkpoint if the record and its session's
// liveness are as read.
func (s *Store) Checkpoint(ctx context.Context, group, partition string, epoch uint64, value []byte) error {
	const op = "checkpoint"
	if err := checkContext(ctx, op); err != nil {
		return err
	}
	if err := store.ValidateCheckpoint(group, partition, epoch, value); err != nil {
		return fmt.Errorf("etcdstore: %s: %w", op, err)
	}
	if err := ctx.Err(); err != nil {
		return failure(op, err)
	}
	g := s.groupKey(group)
	v := encodeCheckpoint(now(), value)
	return retry(ctx, op, func() (bool, error) {
		kv, cur, _, err := s.readRecord(ctx, g, partition)
		switch {
		case errors.Is(err, store.ErrCorrupt):
			return false, fmt.Errorf("etcdstore: %s %q: %w", op, partition, err)
		case err != nil:
			return false, failure(op, err)
		case kv == nil || cur.Epoch != epoch || cur.Session == "":
			return false, fmt.Errorf("etcdstore: %s %q at epoch %d: %w", op, partition, epoch, store.ErrNotOwner)
		}
		resp, err := s.c.Txn(withLeader(ctx)).
			If(clientv3.Compare(clientv3.ModRevision(g+"r/"+partition), "=", kv.ModRevision),
				clientv3.Compare(clientv3.CreateRevision(g+"s/"+cur.Session), ">", 0)).
			Then(clientv3.OpPut(g+"c/"+partition, v)).
			Else(clientv3.OpGet(g+"r/"+partition, clientv3.WithKeysOnly())).Commit()
		if err != nil {
			return false, failure(op, err)
		}
		if !resp.Succeeded {
			if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 && kvs[0].ModRevision == kv.ModRevision {
				// The record is as read: its session is not alive.
				return false, fmt.Errorf("etcdstore: %s %q at epoch %d: the owning session has ended: %w", op, partition, epoch, store.ErrNotOwner)
			}
			return false, nil
		}
		return true, nil
	})
}

// Restore implements store.Store.
func (s *Store) Restore(ctx context.Context, group, partition string, epoch uint64, value []byte) error {
	const op = "restore"
	if err := checkContext(ctx, op); err != nil {
		return err
	}
	if err := store.ValidateCheckpoint(group, partition, epoch, value); err != nil {
		return fmt.Errorf("etcdstore: %s: %w", op, err)
	}
	if err := ctx.Err(); err != nil {
		return failure(op, err)
	}
	g := s.groupKey(group)
	return retry(ctx, op, func() (bool, error) {
		kv, cur, seq, err := s.readRecord(ctx, g, partition)
		switch {
		case errors.Is(err, store.ErrCorrupt):
			return false, fmt.Errorf("etcdstore: %s %q: %w", op, partition, err)
		case err != nil:
			return false, failure(op, err)
		case kv != nil && (cur.Session != "" || cur.Epoch >= epoch):
			return false, fmt.Errorf("etcdstore: %s %q: the partition has an owned record or one with an epoch as high: %w", op, partition, store.ErrNotOwner)
		}
		w := &write{g: g, group: group, seq: seq}
		var rev int64
		if kv != nil {
			rev = kv.ModRevision
		}
		w.unchanged(g+"r/"+partition, rev)
		t := now()
		w.put(g+"r/"+partition, mustJSON(record{Epoch: epoch, Since: t.UnixMicro()}))
		if value == nil {
			w.op(clientv3.OpDelete(g + "c/" + partition))
		} else {
			w.put(g+"c/"+partition, encodeCheckpoint(t, value))
		}
		w.append(store.Change{Kind: store.Restored, Partition: partition, Epoch: epoch})
		ok, err := s.commit(ctx, w)
		if err != nil {
			return false, failure(op, err)
		}
		return ok, nil
	})
}
