package herd

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/herdhq/herd/store"
)

// Claim is what a handler gets for one partition it owns.
type Claim struct {
	// Partition is the partition's id.
	Partition string
	// Epoch is the fencing token of this ownership. It strictly increases on
	// every change of owner and never repeats, so a user can fence writes to
	// other systems with it ("write only if my epoch >= the stored one").
	Epoch uint64

	ctx   context.Context
	sess  *session // the session the claim was made under (nil outside herd)
	m     *Member
	mu    sync.Mutex
	last  []byte // the checkpoint when the claim was made (what was recorded since is in prog)
	write func(ctx context.Context, value []byte) error
	prog  progress
}

// Context is cancelled as soon as the partition is lost or is being handed
// off (or the member leaves, crashes or fences itself). The handler must
// return soon after. (A Claim made outside herd, as in a test of a
// handler, has a context that is never cancelled.)
func (c *Claim) Context() context.Context {
	if c.ctx == nil {
		return context.Background()
	}
	return c.ctx
}

// LastCheckpoint is where the partition's processing resumes: the latest
// value this claim recorded, with Mark (even if not yet written) or with
// Checkpoint, or, before either, the partition's checkpoint when the claim
// was made. Nil if the partition has none. A handler started again after
// returning (see Handler) therefore resumes where it left off. The caller
// must not modify the returned slice.
func (c *Claim) LastCheckpoint() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch p := &c.prog; {
	case p.markSeq > p.wroteSeq:
		return append([]byte(nil), p.mark...) // Mark reuses its buffer
	case p.wroteSeq > 0:
		return p.wrote
	}
	return c.last
}

// Checkpoint records value as the partition's progress. The write is fenced:
// it goes through only if this claim's epoch is still the partition's current
// one and the member's session is alive; otherwise nothing is written and the
// error wraps ErrNotOwner. A handler may call Checkpoint after its context was
// cancelled for a handoff (to save its final progress): the partition is
// released only after the handler returns.
//
// The call is bounded by the time at which the member would fence itself if
// its session could not be renewed, whatever ctx is (context.Background()
// included): a write still waiting on the store then fails with an error
// wrapping ErrFenced (it may or may not have been applied; the epoch keeps a
// late application from harming a successor), so that a handler blocked in
// Checkpoint on an unreachable or slow store returns before another member
// may start the partition. Past that time, and once the session is lost or
// fenced, nothing is sent and the error wraps both ErrFenced and
// ErrNotOwner at once. A final checkpoint after a graceful handoff (the
// session still live) is bounded the same way, not refused.
func (c *Claim) Checkpoint(ctx context.Context, value []byte) error {
	if c == nil || c.m == nil || c.write == nil {
		return fmt.Errorf("herd: checkpoint: this Claim was not made by a member (handlers get theirs from herd): %w", store.ErrInvalid)
	}
	if err := c.m.cfg.gate.Wait(ctx); err != nil {
		return err
	}
	if len(value) > store.MaxCheckpointLength {
		return fmt.Errorf("herd: checkpoint of partition %q is %d bytes, over the limit of %d: %w",
			c.Partition, len(value), store.MaxCheckpointLength, store.ErrInvalid)
	}
	if err := c.write(ctx, value); err != nil {
		if errors.Is(err, store.ErrNotOwner) {
			return fmt.Errorf("herd: checkpoint of partition %q at epoch %d rejected: "+
				"this member no longer owns it (another member took it over, or this member's session expired): %w",
				c.Partition, c.Epoch, err)
		}
		return fmt.Errorf("herd: checkpoint of partition %q: %w", c.Partition, err)
	}
	cp := append([]byte(nil), value...)
	c.mu.Lock()
	c.last = cp
	c.mu.Unlock()
	return nil
}
