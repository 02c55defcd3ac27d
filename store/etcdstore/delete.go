package etcdstore

import (
	"context"
	"encoding/json"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/herdhq/herd/store"
)

// DeleteGroup implements store.Store: one transaction deletes the group's
// prefix if its sequence is as read and no pending entry was written since
// the read (a session opened since would have written one); the leases of
// its sessions are revoked after.
func (s *Store) DeleteGroup(ctx context.Context, group string, force bool) error {
	const op = "delete group"
	if err := checkContext(ctx, op); err != nil {
		return err
	}
	if err := store.ValidateGroup(group); err != nil {
		return fmt.Errorf("etcdstore: %s: %w", op, err)
	}
	if err := ctx.Err(); err != nil {
		return failure(op, err)
	}
	g := s.groupKey(group)
	var leases []clientv3.LeaseID
	err := retry(ctx, op, func() (bool, error) {
		resp, err := s.c.Txn(withLeader(ctx)).Then(clientv3.OpGet(g+"q"), clientv3.OpGet(g+"m/", clientv3.WithPrefix()),
			clientv3.OpGet(g+"s/", clientv3.WithPrefix(), clientv3.WithKeysOnly())).Commit()
		if err != nil {
			return false, failure(op, err)
		}
		seq, _ := decodeSeq(resp.Responses[0].GetResponseRange().Kvs) // deleted whatever it holds
		if live := resp.Responses[2].GetResponseRange().Kvs; len(live) > 0 && !force {
			return false, fmt.Errorf("etcdstore: %s: %w", op, store.InUseError(group, len(live)))
		}
		leases = leases[:0]
		for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
			var info sessionInfo
			if json.Unmarshal(kv.Value, &info) == nil {
				leases = append(leases, info.Lease)
			}
		}
		t, err := s.c.Txn(withLeader(ctx)).If(clientv3.Compare(clientv3.ModRevision(g+"q"), "=", seq.rev),
			clientv3.Compare(clientv3.ModRevision(g+"u/"), "<", resp.Header.Revision+1).WithPrefix()).
			Then(clientv3.OpDelete(g, clientv3.WithPrefix()), clientv3.OpDelete(s.indexKey(group))).Commit()
		if err != nil {
			return false, failure(op, err)
		}
		return t.Succeeded, nil
	})
	if err != nil {
		return err
	}
	for _, l := range leases {
		s.revoke(l)
	}
	return nil
}
