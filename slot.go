package herd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herdhq/herd/internal/loadmeter"
	"github.com/herdhq/herd/store"
)

// slot modes, read by a partition's goroutine once its context is cancelled.
const (
	modeRun      int32 = iota // owned and running
	modeHandoff               // handing off: release after the handler returns
	modeLost                  // lost: return without releasing
	modeGiveBack              // the handler returned ErrGiveBack: give the partition back (GiveBack)
)

// slot is one partition this member runs or is stopping, from its claim to
// its release.
type slot struct {
	c          Claim
	counter    loadmeter.Counter // c.load
	sess       *session
	cancel     context.CancelFunc
	mode       atomic.Int32
	released   atomic.Bool  // set once released (normal path or ForceHandoff)
	coming     atomic.Int32 // the releaser's count of handoffs (comingNone ...)
	seq        uint64       // the claim's number among the member's writes (Member.writes)
	planInFull atomic.Bool  // once it is done, plan in full: no entry will end the target (a failed give-back, claimOnceStopped)
	at         int32        // where plan last found the partition in the set (a hint: see partIndex); reconcile loop only
	watch      watchdog     // armed by handOff
}

// runsFor reports whether sl runs its handler for session s: not lost,
// handing off or giving back.
func (sl *slot) runsFor(s *session) bool { return sl.sess == s && sl.mode.Load() == modeRun }

// claimOnceStopped: plan would claim sl's partition for sess but leaves it
// alone while sl runs; if sl does not run for sess, its return plans in full.
func (sl *slot) claimOnceStopped(sess *session) {
	if !sl.runsFor(sess) {
		sl.planInFull.Store(true)
	}
}

// handOff cancels sl's handler so that its partition is released (or given
// back) once it returned, with the rest of the handoff (releaser.expect).
func (m *Member) handOff(sl *slot) {
	if sl.mode.CompareAndSwap(modeRun, modeHandoff) {
		m.rel.expect(sl)
		sl.watch.arm()
	}
	sl.cancel()
	m.unown(sl.c.Partition)
}

// start runs the handler of a partition just claimed; at is its index in
// the plan's set (-1: unknown).
func (m *Member) start(sess *session, slots map[string]*slot, o store.Ownership, seq uint64, at int32) {
	hctx, cancel := context.WithCancel(sess.ctx)
	// One allocation for the slot, its claim and the claim's counter
	// (BenchmarkMemberPlacement: 9 allocations per claim, 11 with three).
	sl := &slot{sess: sess, cancel: cancel, seq: seq, at: max(at, 0)}
	sl.watch.m, sl.watch.sl = m, sl
	part, epoch := o.Partition, o.Epoch
	sl.c = Claim{Partition: part, Epoch: epoch, ctx: hctx, m: m, sess: sess, last: o.Checkpoint,
		write: m.claimWrite(sess, part, epoch), load: &sl.counter}
	m.startMeasure(&sl.c)
	slots[part] = sl
	m.running.mu.Lock()
	m.running.owned[part] = epoch
	m.running.handlers[part]++ // before the goroutine, for a Leave that follows at once
	m.running.mu.Unlock()
	go m.runSlot(sl)
}

// claimWrite returns a claim's write, the one path of a handler's writes
// to the store: bounded by the session's fence time, and refused at once
// (ErrFenced and ErrNotOwner) past it or once the session is lost.
func (m *Member) claimWrite(sess *session, part string, epoch uint64) func(ctx context.Context, v []byte) error {
	group := m.cfg.Group
	return m.metrics.CountFencing(func(ctx context.Context, v []byte) error {
		fctx, cancel, ok := sess.withFence(ctx)
		defer cancel()
		if !ok {
			why := "the session was not renewed in time"
			if sess.ctx.Err() != nil {
				why = "the session is lost or fenced"
			}
			return fmt.Errorf("%w: nothing written, as %s: %w", ErrFenced, why, store.ErrNotOwner)
		}
		err := m.st.Checkpoint(fctx, group, part, epoch, v)
		if err != nil && ctx.Err() == nil && (errors.Is(context.Cause(fctx), ErrFenced) || sess.pastFence()) {
			return fmt.Errorf("%w: the write did not complete before the session's fence time (it may have been applied; its epoch fences it): %w", ErrFenced, err)
		}
		return err
	})
}

// runSlot runs sl's handler until its context is cancelled, then releases
// the partition if handed off.
func (m *Member) runSlot(sl *slot) {
	c := &sl.c
	defer func() { m.events.slotDone <- sl }()
	for {
		err := m.callHandler(c)
		if (errors.Is(err, ErrGiveBack) && m.giveBack(sl, err)) || c.ctx.Err() != nil {
			break
		}
		if err != nil {
			m.log.Error("handler failed; restarting it", "partition", c.Partition, "err", err, "after", m.cfg.RestartDelay)
		}
		select {
		case <-c.ctx.Done():
		case <-time.After(m.cfg.RestartDelay):
		}
		if c.ctx.Err() != nil {
			break
		}
	}
	sl.watch.disarm() // armed by handOff
	mode := sl.mode.Load()
	m.stopMeasure(c, mode == modeHandoff || mode == modeGiveBack)
	m.running.mu.Lock()
	if m.running.handlers[c.Partition]--; m.running.handlers[c.Partition] <= 0 {
		delete(m.running.handlers, c.Partition) // counted in by start
	}
	m.running.mu.Unlock()
	m.finishProgress(sl) // the last Mark is written before the release
	if mode := sl.mode.Load(); mode == modeHandoff || mode == modeGiveBack {
		m.release(sl)
		m.releasedMeasure(c)
	}
	m.rel.arrived(sl) // if not released (lost, given back)
}

// watchdog warns, or with ForceHandoff releases the partition, when a
// handler handed off has not returned within MaxShutdown. arm (reconcile
// loop) may run after disarm (slot's goroutine): under one lock, an arm
// after disarm does nothing, and a timer armed before is stopped or waited.
type watchdog struct {
	m  *Member
	sl *slot

	mu       sync.Mutex
	returned bool          // the handler has returned: never arm, never act
	timer    *time.Timer   // armed at the handoff's cancellation
	fired    chan struct{} // closed when the timer's function has returned
}

func (w *watchdog) arm() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.returned || w.sl.mode.Load() != modeHandoff {
		return
	}
	w.fired = make(chan struct{})
	w.timer = time.AfterFunc(w.m.cfg.MaxShutdown, w.expire)
}

func (w *watchdog) expire() {
	defer close(w.fired)
	w.mu.Lock()
	returned := w.returned
	w.mu.Unlock()
	if returned || w.sl.mode.Load() != modeHandoff {
		return
	}
	m, p := w.m, w.sl.c.Partition
	if m.cfg.ForceHandoff {
		m.log.Error("handler did not return within MaxShutdown; releasing anyway (ForceHandoff)", "partition", p)
		m.release(w.sl)
		return
	}
	m.log.Error("handler did not return within MaxShutdown; keeping the partition until it does", "partition", p, "max_shutdown", m.cfg.MaxShutdown)
}

// disarm, once the handler returned, waits for a forced release begun.
func (w *watchdog) disarm() {
	w.mu.Lock()
	w.returned = true
	t, fired := w.timer, w.fired
	w.mu.Unlock()
	if t != nil && !t.Stop() {
		<-fired
	}
}

// callHandler turns a handler's panic into an error: one bad partition
// does not take the process down with partitions still held.
func (m *Member) callHandler(c *Claim) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panicked: %v", r)
		}
	}()
	return m.cfg.Handler(c)
}

// release releases (or gives back) sl's partition once; it returns when
// the store answered or the member stopped.
func (m *Member) release(sl *slot) {
	if !sl.released.CompareAndSwap(false, true) {
		return
	}
	if sl.mode.Load() == modeGiveBack {
		m.sendGiveBack(sl)
		return
	}
	m.rel.release(sl)
}
