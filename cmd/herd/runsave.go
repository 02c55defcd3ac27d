package main

import (
	"context"
	"errors"
	"time"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/internal/checkpointsock"
)

// A child's checkpoint requests, through herd run's socket.

// saveTimeout bounds one checkpoint request (the member bounds it further
// by its session's fence time).
const saveTimeout = 10 * time.Second

// save answers a checkpoint request from a child.
func (r *runner) save(ctx context.Context, part string, epoch uint64, value []byte) checkpointsock.Reply {
	r.mu.Lock()
	c := r.claims[part]
	r.mu.Unlock()
	if c == nil {
		return checkpointsock.Reply{Fenced: true, Current: r.currentEpoch(part)}
	}
	if c.Epoch != epoch {
		return checkpointsock.Reply{Fenced: true, Current: c.Epoch}
	}
	ctx, cancel := context.WithTimeout(ctx, saveTimeout)
	defer cancel()
	err := c.Checkpoint(ctx, value)
	switch {
	case err == nil:
		return checkpointsock.Reply{}
	case errors.Is(err, herd.ErrNotOwner):
		return checkpointsock.Reply{Fenced: true, Current: r.currentEpoch(part)}
	}
	return checkpointsock.Reply{Err: err}
}

// currentEpoch is the partition's epoch as the member's copy of the group
// shows it, 0 if unknown. It reads nothing from the store: a child that
// retries a fenced save in a loop costs the store nothing (a read of the
// whole group per reply would cost O(partitions) each).
func (r *runner) currentEpoch(part string) uint64 {
	if m := r.joined.Load(); m != nil {
		return m.KnownEpoch(part)
	}
	return 0
}
