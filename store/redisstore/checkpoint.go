package redisstore

// Checkpoints and restores, fenced by the epoch.

import (
	"context"
	"fmt"
	"strconv"

	"github.com/herdhq/herd/store"
)

// Checkpoint implements store.Store.
func (s *Store) Checkpoint(ctx context.Context, group, partition string, epoch uint64, value []byte) error {
	if err := s.begin(ctx, "Checkpoint", store.ValidateCheckpoint(group, partition, epoch, value)); err != nil {
		return err
	}
	if value == nil {
		value = []byte{}
	}
	k := s.keys(group)
	status, _, err := s.run(ctx, "Checkpoint", checkpointScript, []string{k.sessions, k.owners, k.checkpoints, k.ckptat},
		partition, strconv.FormatUint(epoch, 10), value)
	if err != nil {
		return err
	}
	switch status {
	case "ok":
		return nil
	case "notowner":
		return fmt.Errorf("redisstore: Checkpoint of %q at epoch %d: %w", partition, epoch, store.ErrNotOwner)
	}
	return unexpected("Checkpoint", status)
}

// Restore implements store.Store.
func (s *Store) Restore(ctx context.Context, group, partition string, epoch uint64, value []byte) error {
	if err := s.begin(ctx, "Restore", store.ValidateCheckpoint(group, partition, epoch, value)); err != nil {
		return err
	}
	if value == nil {
		value = []byte{}
	}
	k := s.keys(group)
	status, _, err := s.runLogged(ctx, "Restore", restoreScript, k, []string{k.owners, k.checkpoints, k.epochat, k.ckptat, k.givenback},
		partition, strconv.FormatUint(epoch, 10), value)
	if err != nil {
		return err
	}
	switch status {
	case "ok":
		return nil
	case "notowner":
		return fmt.Errorf("redisstore: Restore of %q: the partition has an owned record or one with an epoch as high: %w", partition, store.ErrNotOwner)
	}
	return unexpected("Restore", status)
}
