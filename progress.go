package herd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/herdhq/herd/store"
)

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
