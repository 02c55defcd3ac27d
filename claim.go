package herd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/herdhq/herd/internal/loadmeter"
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
	last  []byte                                        // the checkpoint when the claim was made (what was recorded since is in prog)
	write func(ctx context.Context, value []byte) error // the fenced write (claimWrite); nil outside herd
	prog  progress
	load  *loadmeter.Counter // its marks, or the handler's own load (nil outside herd)
}

// Context is cancelled as soon as the partition is lost or is being handed
// off (or the member leaves, crashes or fences itself); the handler must
// return soon after. Never cancelled for a Claim made outside herd.
func (c *Claim) Context() context.Context {
	if c.ctx == nil {
		return context.Background()
	}
	return c.ctx
}

// LastCheckpoint is where the partition's processing resumes: the latest
// value this claim recorded with Mark (even if not yet written) or
// Checkpoint, or else the partition's checkpoint when the claim was made;
// nil if none. A handler started again resumes where it left off. The
// caller must not modify the returned slice.
func (c *Claim) LastCheckpoint() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastLocked()
}

// lastLocked is LastCheckpoint, called with c.mu held.
func (c *Claim) lastLocked() []byte {
	switch p := &c.prog; {
	case p.markSeq > p.wroteSeq:
		return append([]byte(nil), p.mark...) // Mark reuses its buffer
	case p.wroteSeq > 0:
		return p.wrote
	}
	return c.last
}

// Checkpoint records value as the partition's progress. The write is fenced:
// it goes through only if this claim's epoch is still current and the
// session alive, else the error wraps ErrNotOwner. A handler may call it
// after its context was cancelled for a handoff, to save its final progress.
// The call is bounded by the claim's FenceTime, whatever ctx: a write still
// waiting then fails wrapping ErrFenced (it may have been applied; the epoch
// keeps it from harming a successor). Past that time, or once the session
// is lost, nothing is sent and the error wraps ErrFenced and ErrNotOwner.
func (c *Claim) Checkpoint(ctx context.Context, value []byte) error {
	if c == nil || c.m == nil || c.write == nil {
		return fmt.Errorf("herd: checkpoint: this Claim was not made by a member (handlers get theirs from herd): %w", store.ErrInvalid)
	}
	if ctx == nil {
		return errNilContext("checkpoint")
	}
	c.load.Mark() // an item processed, whatever the write's fate
	if err := c.m.cfg.gate.Wait(ctx); err != nil {
		return err
	}
	if len(value) > store.MaxCheckpointLength {
		return fmt.Errorf("herd: checkpoint of partition %q is %d bytes, over the limit of %d: %w",
			c.Partition, len(value), store.MaxCheckpointLength, store.ErrInvalid)
	}
	if err := c.checkpoint(ctx, value); err != nil {
		if errors.Is(err, store.ErrNotOwner) {
			return fmt.Errorf("herd: checkpoint of partition %q at epoch %d rejected: "+
				"this member no longer owns it (another member took it over, or this member's session expired): %w",
				c.Partition, c.Epoch, err)
		}
		return fmt.Errorf("herd: checkpoint of partition %q: %w", c.Partition, err)
	}
	return nil
}

// FenceTime is when the member fences itself, cancelling this claim's
// handler and refusing its writes, unless a renewal succeeds first (the
// last successful renewal's send time plus SessionTTL-FenceMargin), on the
// monotonic clock. Past it another member may own the partition even if
// Context is not cancelled yet (a stopped or starved process cancels late):
// check it before an action that must not start after a loss. Once
// SessionDone is closed the claim is fenced, whatever FenceTime says. Zero
// for a Claim made outside herd.
func (c *Claim) FenceTime() time.Time {
	if c.sess != nil {
		if t := c.sess.fence.Load(); t != nil {
			return *t
		}
	}
	return time.Time{}
}

// SessionDone is closed when the session under which this claim was made
// has ended: fenced, expired in the store, or the member stopped (Join's
// context cancelled, or the end of a Leave). Another member may then start
// the partition as soon as the store expires the session, so a handler still
// finishing after a handoff must stop at once (herd run cuts its child's
// SIGTERM grace short here); SessionCause says why. Never closed for a Claim
// made outside herd.
func (c *Claim) SessionDone() <-chan struct{} {
	if c.sess == nil {
		return nil
	}
	return c.sess.ctx.Done()
}

// SessionCause says why the claim's session ended (ErrFenced,
// ErrSessionExpired, ErrLeft, or the error of Join's context), nil while it
// lives.
func (c *Claim) SessionCause() error {
	if c.sess == nil {
		return nil
	}
	return context.Cause(c.sess.ctx)
}
