package redisstore

// Changes of ownership: claims and releases in batches, and the expiry of due sessions; each logged by its script.

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/herdhq/herd/store"
)

// ExpireSessions implements store.Store: one script per 1,000 due sessions.
func (s *Store) ExpireSessions(ctx context.Context, group string) (time.Duration, error) {
	if err := s.begin(ctx, "ExpireSessions", store.ValidateGroup(group)); err != nil {
		return 0, err
	}
	k := s.keys(group)
	for {
		status, res, err := s.runLogged(ctx, "ExpireSessions", expireScript, k, []string{k.sessions, k.members},
			expireBatch)
		if err != nil {
			return 0, err
		}
		if status != "ok" {
			return 0, unexpected("ExpireSessions", status)
		}
		if n, _ := res[0].(int64); n < expireBatch {
			return micros(str(res, 1)), nil
		}
	}
}

// ClaimBatch implements store.Store: one script for the whole batch.
func (s *Store) ClaimBatch(ctx context.Context, group, session string, partitions []string) ([]store.ClaimResult, error) {
	if err := s.begin(ctx, "ClaimBatch", store.ValidateClaimBatch(group, session, partitions)); err != nil {
		return nil, err
	}
	if len(partitions) == 0 {
		return []store.ClaimResult{}, nil
	}
	k := s.keys(group)
	args := make([]any, 0, 2+len(partitions))
	args = append(args, session)
	for _, p := range partitions {
		args = append(args, p)
	}
	status, res, err := s.runLogged(ctx, "ClaimBatch", claimBatchScript, k,
		[]string{k.sessions, k.members, k.owners, k.checkpoints, k.epochat, k.givenback}, args...)
	if err != nil {
		return nil, err
	}
	switch status {
	case "ok":
	case "expired":
		return nil, fmt.Errorf("redisstore: ClaimBatch by session %q: %w", session, store.ErrSessionExpired)
	default:
		return nil, unexpected("ClaimBatch", status)
	}
	if len(res) != 1+len(partitions) {
		return nil, fmt.Errorf("redisstore: ClaimBatch: %d results for %d partitions", len(res)-1, len(partitions))
	}
	member := str(res, 0)
	out := make([]store.ClaimResult, len(partitions))
	for i, p := range partitions {
		r, _ := res[1+i].([]any)
		switch str(r, 0) {
		case "ok":
			epoch, err := strconv.ParseUint(str(r, 1), 10, 64)
			if err != nil {
				out[i].Err = corrupt(k.owners, p, "epoch %q", str(r, 1))
				continue
			}
			out[i].Ownership = store.Ownership{Partition: p, Session: session, Member: member, Epoch: epoch,
				Checkpoint: bytesAt(r, 2), GivenBack: mark(str(r, 3))}
		case "claimed":
			out[i].Err = fmt.Errorf("redisstore: ClaimBatch of %q: owned by live session %q: %w", p, str(r, 1), store.ErrClaimed)
		case "corrupt":
			out[i].Err = fmt.Errorf("redisstore: ClaimBatch: key %q field %q cannot be decoded: %w", str(r, 1), str(r, 2), store.ErrCorrupt)
		default:
			out[i].Err = unexpected("ClaimBatch", str(r, 0))
		}
	}
	return out, nil
}

// ReleaseBatch implements store.Store: one script for the whole batch.
func (s *Store) ReleaseBatch(ctx context.Context, group, session string, held []store.Ownership) ([]error, error) {
	if err := s.begin(ctx, "ReleaseBatch", store.ValidateReleaseBatch(group, session, held)); err != nil {
		return nil, err
	}
	if len(held) == 0 {
		return []error{}, nil
	}
	k := s.keys(group)
	args := make([]any, 0, 2+2*len(held))
	args = append(args, session)
	for _, o := range held {
		args = append(args, o.Partition, strconv.FormatUint(o.Epoch, 10))
	}
	status, res, err := s.runLogged(ctx, "ReleaseBatch", releaseBatchScript, k,
		[]string{k.sessions, k.members, k.owners}, args...)
	if err != nil {
		return nil, err
	}
	if status != "ok" {
		return nil, unexpected("ReleaseBatch", status)
	}
	if len(res) != len(held) {
		return nil, fmt.Errorf("redisstore: ReleaseBatch: %d results for %d records", len(res), len(held))
	}
	out := make([]error, len(held))
	for i, o := range held {
		r, _ := res[i].([]any)
		switch str(r, 0) {
		case "ok":
		case "notowner":
			out[i] = fmt.Errorf("redisstore: ReleaseBatch of %q at epoch %d by session %q: %w", o.Partition, o.Epoch, session, store.ErrNotOwner)
		case "corrupt":
			out[i] = fmt.Errorf("redisstore: ReleaseBatch: key %q field %q cannot be decoded: %w", str(r, 1), str(r, 2), store.ErrCorrupt)
		default:
			out[i] = unexpected("ReleaseBatch", str(r, 0))
		}
	}
	return out, nil
}
