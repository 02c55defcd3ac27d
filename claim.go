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

// progress is what a claim knows of its handler's progress, under the
// claim's mu. Mark and Checkpoint calls are numbered (seq); the store only
// gets a value numbered above the last it accepted: the later call wins.
type progress struct {
	seq        uint64 // numbers Mark and Checkpoint calls
	mark       []byte // the value last marked; unwritten while markSeq > wroteSeq
	markSeq    uint64
	wrote      []byte // the value last written by this claim (valid if wroteSeq > 0)
	wroteSeq   uint64
	sending    []byte // the value of the write under way, which the store may have already (restorePoint)
	sendingSeq uint64 // sending is valid if > 0

	timer   *time.Timer    // armed while a marked value waits for its timed write
	flushes sync.WaitGroup // armed timers whose function has not returned
	stop    error          // set when timed writes end: Mark returns it
	refused bool           // the store refused a write of this claim (stop says so)
	warned  bool           // a failed write has been logged

	writeMu sync.Mutex // one store write at a time
}

// Mark records a copy of value as the partition's progress, in memory, and
// returns at once. The member writes the latest marked value (fenced by the
// epoch, as Checkpoint) at most once per Config.CheckpointInterval, and
// once more before the partition is released after the handler returned for
// good: a handoff or Leave never loses the last mark, a crash loses at most
// CheckpointInterval. Nothing is written once the partition is lost.
//
// Call Mark after an item's work is done ("everything up to here is
// processed"), Checkpoint where the position must be stored before the
// handler goes on (one round trip). Mixed, the later call wins. Mark
// returns an error wrapping store.ErrInvalid if value is longer than
// store.MaxCheckpointLength, and one wrapping ErrNotOwner once the store
// refused a write of this claim or the claim ended: nothing is recorded.
func (c *Claim) Mark(value []byte) error {
	if len(value) > store.MaxCheckpointLength {
		return fmt.Errorf("herd: mark of partition %q: %d bytes, over the limit of %d: %w",
			c.Partition, len(value), store.MaxCheckpointLength, store.ErrInvalid)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	p := &c.prog
	if p.stop != nil {
		return p.stop
	}
	p.mark = append(p.mark[:0], value...)
	c.load.Mark()
	p.seq++
	p.markSeq = p.seq
	c.armFlush()
	return nil
}

// armFlush arms the timer of the next timed write. c.mu is held.
func (c *Claim) armFlush() {
	p := &c.prog
	if p.timer != nil || p.stop != nil || c.m == nil || c.write == nil {
		return
	}
	p.flushes.Add(1)
	p.timer = time.AfterFunc(c.m.cfg.CheckpointInterval, c.timedFlush)
}

// timedFlush writes the latest marked value, and on a failure arms again.
func (c *Claim) timedFlush() {
	defer c.prog.flushes.Done()
	c.mu.Lock()
	c.prog.timer = nil
	stopped := c.prog.stop != nil
	c.mu.Unlock()
	if stopped {
		return
	}
	if err := c.flush(); err != nil {
		c.mu.Lock()
		if c.prog.markSeq > c.prog.wroteSeq {
			c.armFlush()
		}
		c.mu.Unlock()
	}
}

// flush writes the latest marked value within RenewTimeout unless the store
// has it or newer, the only case that makes a context (100,000 partitions
// stopping spent a tenth of their members' CPU making them). Only a first
// failure is logged.
func (c *Claim) flush() error {
	p := &c.prog
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	c.mu.Lock()
	if c.write == nil || p.markSeq <= p.wroteSeq || p.refused {
		c.mu.Unlock()
		return nil
	}
	v, seq := append([]byte(nil), p.mark...), p.markSeq // Mark reuses its buffer
	c.mu.Unlock()

	ctx, cancel := context.WithTimeout(c.m.runCtx, c.m.cfg.RenewTimeout)
	defer cancel()
	err := c.m.cfg.gate.Wait(ctx)
	if err == nil {
		err = p.write(ctx, c, v, seq)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case err == nil:
	case errors.Is(err, store.ErrNotOwner):
		c.m.log.Debug("recorded progress refused: the partition has another owner", "partition", c.Partition, "epoch", c.Epoch)
	case !p.warned && c.m.runCtx.Err() == nil:
		p.warned = true
		c.m.log.Warn("writing recorded progress failed; trying again later (further failures of this partition are not logged)",
			"partition", c.Partition, "epoch", c.Epoch, "err", err)
	}
	return err
}

// write sends v (the caller's copy), numbered seq, through the claim's
// fenced write; a refusal ends the claim's writes. writeMu is held.
func (p *progress) write(ctx context.Context, c *Claim, v []byte, seq uint64) error {
	c.mu.Lock()
	p.sending, p.sendingSeq = v, seq
	c.mu.Unlock()
	err := c.write(ctx, v)
	c.mu.Lock()
	defer c.mu.Unlock()
	p.sending, p.sendingSeq = nil, 0
	switch {
	case err == nil:
		p.wrote, p.wroteSeq = v, seq
	case errors.Is(err, store.ErrNotOwner) && !p.refused:
		p.refused = true
		p.stop = fmt.Errorf("herd: progress of partition %q at epoch %d not recorded: a write was refused, this member no longer owns the partition: %w",
			c.Partition, c.Epoch, err)
	}
	return err
}

// restorePoint is the value to restore if the store loses the record: the
// newest this claim marked, wrote or is writing (which the store may have).
func (c *Claim) restorePoint() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := &c.prog; p.sendingSeq > max(p.wroteSeq, p.markSeq) {
		return p.sending
	}
	return c.lastLocked()
}

// claimEnded is what Mark returns once the handler returned for good,
// formatted only if asked: formatting one per partition stopped was 7% of
// the CPU of a fleet placing 100,000 partitions and leaving.
type claimEnded struct {
	partition string
	epoch     uint64
}

func (e claimEnded) Error() string {
	return fmt.Sprintf("herd: mark of partition %q at epoch %d: the claim has ended (its handler returned): %v",
		e.partition, e.epoch, ErrNotOwner)
}

func (e claimEnded) Unwrap() error { return ErrNotOwner }

func (c *Claim) checkpoint(ctx context.Context, v []byte) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("nothing written, as the context passed is done "+
			"(c.Context() is cancelled once the partition is being handed off or was lost; "+
			"record the last position with Mark, or pass a context of your own): %w", err)
	}
	p := &c.prog
	c.mu.Lock()
	p.seq++
	seq := p.seq
	c.mu.Unlock()
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	c.mu.Lock()
	overtaken := p.wroteSeq > seq
	c.mu.Unlock()
	if overtaken {
		return nil // a later Mark (from another goroutine) is already written
	}
	return p.write(ctx, c, append([]byte(nil), v...), seq)
}

// finishProgress ends timed writes once the handler returned for good, then
// writes the last mark unless the partition or session is lost.
func (m *Member) finishProgress(sl *slot) {
	c := &sl.c
	p := &c.prog
	c.mu.Lock()
	if p.stop == nil {
		p.stop = claimEnded{c.Partition, c.Epoch}
	}
	t := p.timer
	p.timer = nil
	c.mu.Unlock()
	if t != nil && t.Stop() {
		p.flushes.Done() // its function will not run
	}
	p.flushes.Wait()
	if sl.mode.Load() == modeLost || sl.sess.ctx.Err() != nil || m.runCtx.Err() != nil {
		return
	}
	_ = c.flush() // a failure is logged by flush
}
