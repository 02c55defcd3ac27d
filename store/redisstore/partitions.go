package redisstore

// The partition set.

import (
	"context"
	"fmt"
	"strconv"

	"github.com/herdhq/herd/store"
)

// SetPartitions implements store.Store. A set of more than
// smallSet partitions is sent in two steps: its digest first, which is all
// the store needs when the set stored is the same (or is kept), then the
// whole set only if the store asks for it. So a hundred members joining
// with the same set of 100,000 partitions send it whole only while none is
// stored (a fresh group), and the store writes it once.
func (s *Store) SetPartitions(ctx context.Context, group string, ps store.PartitionSet) (store.SetResult, error) {
	if err := s.begin(ctx, "SetPartitions", store.ValidateSetPartitions(group, ps)); err != nil {
		return store.SetResult{}, err
	}
	k := s.keys(group)
	mode, digest := "replace", ""
	switch ps.Mode {
	case store.SetIfAbsent:
		mode = "ifabsent"
	case store.SetKindOnly:
		mode = "kindonly"
	}
	if ps.Mode != store.SetKindOnly {
		digest = store.Digest(ps.Partitions)
	}
	ks := []string{k.partitions, k.partset, k.partlist, k.setinfo}
	full := ps.Mode != store.SetKindOnly && len(ps.Partitions) <= smallSet
	for {
		args := []any{ps.Kind, mode, digest, "0"}
		if full {
			args[3] = "1"
			args = append(args, encodePartList(ps.Partitions))
			for _, p := range ps.Partitions {
				args = append(args, p.ID, strconv.Itoa(p.Weight))
			}
		}
		status, res, err := s.runLogged(ctx, "SetPartitions", setPartitionsScript, k, ks, args...)
		if err != nil {
			return store.SetResult{}, err
		}
		r := store.SetResult{Kind: str(res, 0), Stored: str(res, 1) == "1"}
		switch {
		case status == "kind":
			return r, fmt.Errorf("redisstore: SetPartitions: %w", store.KindError(group, r.Kind, ps.Kind))
		case status == "need" && !full:
			full = true
			continue
		case status != "ok":
			return store.SetResult{}, unexpected("SetPartitions", status)
		}
		switch str(res, 2) {
		case "same":
			r.Same = true
		case "written", "replaced":
			r.Same, r.Written, r.Replaced = true, true, str(res, 2) == "replaced"
		}
		return r, nil
	}
}

// smallSet is the largest partition set SetPartitions sends whole at once:
// a smaller one costs less to send than a second round trip.
const smallSet = 100
