package redisstore

// The partition set.

import (
	"context"
	"strconv"

	"github.com/herdhq/herd/store"
)

// SetPartitions implements store.Store: the script applies
// store.DecideSet's rule, sent the digest first (store.SendSet).
func (s *Store) SetPartitions(ctx context.Context, group string, ps store.PartitionSet) (store.SetResult, error) {
	if err := s.begin(ctx, "SetPartitions", store.ValidateSetPartitions(group, ps)); err != nil {
		return store.SetResult{}, err
	}
	k := s.keys(group)
	ks := []string{k.partitions, k.partset, k.partlist, k.setinfo}
	return store.SendSet("redisstore: SetPartitions", group, ps, func(step store.SetStep) (store.SetReply, error) {
		args := []any{ps.Kind, step.Mode, step.Digest, "0"}
		if step.Full {
			args[3] = "1"
			args = append(args, encodePartList(ps.Partitions))
			for _, p := range ps.Partitions {
				args = append(args, p.ID, strconv.Itoa(p.Weight))
			}
		}
		status, res, err := s.runLogged(ctx, "SetPartitions", setPartitionsScript, k, ks, args...)
		return store.SetReply{Status: status, Kind: str(res, 0), Stored: str(res, 1) == "1", What: str(res, 2)}, err
	})
}
