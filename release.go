package herd

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herdhq/herd/store"
)

// releaser batches the releases of handoffs begun together (by one plan, or
// Leave), up to MaxBatch.
type releaser struct {
	m        *Member
	mu       sync.Mutex
	queue    []releaseReq
	released map[string]uint64 // partition -> epoch of records released (or not ours) that the replica may still show as ours; under mu
	wake     chan struct{}     // capacity 1: there is something in queue, or the last expected slot arrived
	coming   atomic.Int64      // slots handed off (expect) that have not arrived; may dip below zero for a moment
}

// releaseGather is the longest a release waits for the others of its
// handoff: one store call and log entry (waking every member) per handoff.
const releaseGather = 20 * time.Millisecond

// Slot states for the releaser's count (slot.coming).
const (
	comingNone     int32 = iota // not expected, not arrived
	comingExpected              // counted in releaser.coming
	comingArrived               // arrived (counted out, or never counted)
)

// expect notes, before sl's handler is cancelled, that its release is coming.
func (r *releaser) expect(sl *slot) {
	if sl.coming.CompareAndSwap(comingNone, comingExpected) {
		r.coming.Add(1)
	}
}

// hold makes the releaser wait as for one more slot until done is called,
// so that handoffs begun together are all expected before it sends.
func (r *releaser) hold() (done func()) {
	r.coming.Add(1)
	return r.countOut
}

// arrived: sl's release is queued, or it is not released (lost, given back). Idempotent.
func (r *releaser) arrived(sl *slot) {
	if sl.coming.Swap(comingArrived) == comingExpected {
		r.countOut()
	}
}

func (r *releaser) countOut() {
	if r.coming.Add(-1) <= 0 {
		notify(r.wake)
	}
}

type releaseReq struct {
	sl   *slot
	done chan struct{} // closed when the store answered, or the member stopped
}

func (r *releaser) release(sl *slot) {
	done := make(chan struct{})
	r.mu.Lock()
	r.queue = append(r.queue, releaseReq{sl: sl, done: done})
	r.mu.Unlock()
	r.arrived(sl)
	notify(r.wake)
	<-done
}

// loop sends the queued releases until stop is closed (every slot has
// returned), retrying after 20 ms doubling up to Config.retryPause.
func (r *releaser) loop(stop <-chan struct{}) {
	retry := stoppedTimer()
	failures := 0 // sends that failed in a row
	for {
		select {
		case <-r.wake:
		case <-retry.C:
		case <-stop:
			r.flush() // nothing should be left; never leave a waiter blocked
			return
		}
		r.gather(stop)
		if r.flush() {
			failures = 0
			continue
		}
		retry.Reset(min(20*time.Millisecond<<min(failures, 10), r.m.cfg.retryPause()))
		failures++
	}
}

// gather waits until every slot expected arrived, a batch is full, or
// releaseGather passed.
func (r *releaser) gather(stop <-chan struct{}) {
	t := time.NewTimer(releaseGather)
	for r.coming.Load() > 0 {
		r.mu.Lock()
		full := len(r.queue) >= store.MaxBatch
		r.mu.Unlock()
		if full {
			return
		}
		select {
		case <-r.wake:
		case <-t.C:
			return
		case <-stop:
			return
		}
	}
}

// flush sends everything queued, a batch of one session's slots at a time,
// and queues again (reporting false) what the store did not apply, unless
// its session ended (its records free with it).
func (r *releaser) flush() (landed bool) {
	var again []releaseReq
	for {
		r.mu.Lock()
		if len(r.queue) == 0 {
			r.queue = append(r.queue, again...)
			r.mu.Unlock()
			return len(again) == 0
		}
		sess := r.queue[0].sl.sess
		var batch []releaseReq
		rest := r.queue[:0]
		for _, q := range r.queue {
			if q.sl.sess == sess && len(batch) < store.MaxBatch {
				batch = append(batch, q)
			} else {
				rest = append(rest, q)
			}
		}
		r.queue = rest
		r.mu.Unlock()
		failed := r.send(sess, batch)
		if sess.ctx.Err() != nil || r.m.runCtx.Err() != nil {
			failed = nil // the session's records free with it
		}
		for _, q := range batch {
			if failed[q.sl] {
				again = append(again, q)
			} else {
				close(q.done)
			}
		}
	}
}

// send releases one batch of slots of sess, and returns those a retry
// could release (not a broken record or group, nor an expired session).
func (r *releaser) send(sess *session, batch []releaseReq) (failed map[*slot]bool) {
	m := r.m
	// The run context, not the session's (cancelled for the handoff): the epoch fences it.
	if m.cfg.gate.Wait(m.runCtx) != nil {
		return nil
	}
	held := make([]store.Ownership, len(batch))
	for i, q := range batch {
		held[i] = store.Ownership{Partition: q.sl.c.Partition, Epoch: q.sl.c.Epoch}
	}
	ctx, cancel := context.WithTimeout(m.runCtx, m.cfg.RenewTimeout)
	defer cancel()
	errs, err := m.st.ReleaseBatch(ctx, m.cfg.Group, sess.id, held)
	if err == nil && len(errs) != len(held) {
		err = errors.New("the store answered a different number of results")
	}
	failed = map[*slot]bool{}
	switch {
	case errors.Is(err, store.ErrCorrupt): // the group's keys broke (by hand): the next read reports it
		m.log.Debug("release failed; the partitions free when the session ends", "partitions", len(held), "err", err)
		m.rep.distrust()
		return nil
	case errors.Is(err, store.ErrSessionExpired):
		return nil // the session ended: its records are free
	case err != nil:
		m.log.Warn("release failed; retrying", "partitions", len(held), "err", err)
		for _, q := range batch {
			failed[q.sl] = true
		}
		return failed
	}
	var done []store.Ownership
	corrupt := false
	for i, e := range errs {
		switch {
		case e == nil || errors.Is(e, store.ErrNotOwner):
			done = append(done, held[i])
		case errors.Is(e, store.ErrCorrupt): // broken by hand: the next read reports it
			m.log.Debug("release failed; the partition frees when the session ends", "partition", held[i].Partition, "err", e)
			corrupt = true
		default:
			m.log.Warn("release failed; retrying", "partition", held[i].Partition, "err", e)
			failed[batch[i].sl] = true
		}
	}
	m.noteReleased(done)
	if corrupt {
		m.rep.distrust()
	}
	return failed
}

// noteReleased notes records as released, for plan not to release them again.
func (m *Member) noteReleased(held []store.Ownership) {
	m.rel.mu.Lock()
	defer m.rel.mu.Unlock()
	for _, r := range held {
		m.rel.released[r.Partition] = r.Epoch
	}
}

// releasedAlready reports whether this member released p at epoch (mine:
// the record names its session); p is forgotten once the record differs.
func (m *Member) releasedAlready(p string, epoch uint64, mine bool) bool {
	m.rel.mu.Lock()
	defer m.rel.mu.Unlock()
	e, ok := m.rel.released[p]
	if ok && (!mine || e != epoch) {
		delete(m.rel.released, p)
		return false
	}
	return ok
}
