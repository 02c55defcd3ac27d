package herd

// The releaser: partitions handed off are released in batches, so a member
// that leaves with thousands of partitions makes a few store calls, not one
// per partition.

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herdhq/herd/store"
)

// releaser batches the releases of the member's slots. Handlers that return
// while a batch is in the store queue up, and the next batch takes them all
// (up to store.MaxBatch). Handoffs begun together (by one plan, or Leave)
// are released together: the releaser waits for the slots it expects (see
// expect) at most releaseGather after the first has queued; a lone release
// is sent at once. Its goroutine (loop) is started and stopped by
// Member.run, which stops it only once every slot has returned.
type releaser struct {
	m     *Member
	mu    sync.Mutex
	queue []releaseReq
	wake  chan struct{} // capacity 1: there is something in queue, or the last expected slot arrived
	// coming: slots handed off (expect) that have not reached the releaser
	// yet (arrived). It may dip below zero for a moment: a slot's
	// arrival may be counted before its expectation.
	coming atomic.Int64
}

// releaseGather is the longest the releaser holds a release back for the
// others of its handoff. Without it, a plan handing off 90 partitions (10
// joining 100 members on 100,000 partitions) sent them in 5 to 30 calls as
// their handlers returned, one partition in most (693 calls for a join's
// 9,090 releases, 527 of a single partition), each a log entry that woke
// every member: a cost in store calls and wake-ups a fleet of processes
// pays the same.
const releaseGather = 20 * time.Millisecond

// Slot states for the releaser's count (slot.coming).
const (
	comingNone     int32 = iota // not expected, not arrived
	comingExpected              // counted in releaser.coming
	comingArrived               // arrived (counted out, or never counted)
)

// expect notes that sl is being handed off: its release is coming. Called
// before its handler is cancelled.
func (r *releaser) expect(sl *slot) {
	if sl.coming.CompareAndSwap(comingNone, comingExpected) {
		r.coming.Add(1)
	}
}

// hold makes the releaser wait, as for one more slot expected, until the
// returned function is called: the handoffs begun together (by one plan,
// or Leave) are all expected before it may send, even if the first
// handler returns before the last is cancelled.
func (r *releaser) hold() (done func()) {
	r.coming.Add(1)
	return func() {
		if r.coming.Add(-1) <= 0 {
			r.signal()
		}
	}
}

// arrived notes that sl's goroutine is done with the handoff: its release
// is queued, or it is not released at all (lost, given back). Idempotent.
func (r *releaser) arrived(sl *slot) {
	if sl.coming.CompareAndSwap(comingExpected, comingArrived) {
		if r.coming.Add(-1) <= 0 {
			r.signal()
		}
		return
	}
	sl.coming.CompareAndSwap(comingNone, comingArrived)
}

func (r *releaser) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

type releaseReq struct {
	sl   *slot
	done chan struct{} // closed when the store answered, or the member stopped
}

func newReleaser(m *Member) *releaser {
	return &releaser{m: m, wake: make(chan struct{}, 1)}
}

// release queues sl's release and waits for it.
func (r *releaser) release(sl *slot) {
	done := make(chan struct{})
	r.mu.Lock()
	r.queue = append(r.queue, releaseReq{sl: sl, done: done})
	r.mu.Unlock()
	r.arrived(sl)
	r.signal()
	<-done
}

// loop sends the queued releases until stop is closed (then the queue is
// empty: every slot has returned). A release the store did not apply is
// sent again after a back-off (see flush), until it lands or its session
// ends.
func (r *releaser) loop(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
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
		retry.Reset(releaseBackoff(failures, r.m.cfg.RenewInterval))
		failures++
	}
}

// releaseBackoff is the wait before a failed release is sent again, after
// failures failed sends in a row: 20 ms, doubling up to a quarter of
// RenewInterval (500 ms at most), as a renewal that failed is retried. A
// partition whose handler has returned is owned and idle until its release
// lands, so the retries go on as long as the session lives: with the store
// answering, the release lands within a fraction of RenewInterval (less
// RenewTimeout per attempt that times out).
func releaseBackoff(failures int, renew time.Duration) time.Duration {
	d := 20 * time.Millisecond << min(failures, 10)
	return min(d, renew/4, 500*time.Millisecond)
}

// gather waits until every slot expected has arrived, a batch is full, or
// releaseGather has passed.
func (r *releaser) gather(stop <-chan struct{}) {
	if r.coming.Load() <= 0 {
		return
	}
	t := time.NewTimer(releaseGather)
	defer t.Stop()
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

// flush sends everything queued, one batch (of one session's slots) at a
// time. A release the store did not apply (it answered an error, or did not
// answer) is queued again, unless its session has ended (its records free
// with it) or the member stops: flush reports false if some are, and the
// loop sends them again after a back-off. Issue 28 item 8: a release that
// failed once was never retried, so the partitions stayed owned by the
// member's live session and ran nowhere while the fleet looked settled.
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

// send releases one batch of slots of sess, and returns those whose
// release the store did not apply, or may not have (none if the call
// cannot succeed by being sent again: a broken record or group, a session
// the store no longer knows).
func (r *releaser) send(sess *session, batch []releaseReq) (failed map[*slot]bool) {
	m := r.m
	// Released through the member's run context, not the session's (already
	// cancelled for the handoff): the store still fences it by epoch.
	if m.cfg.gate.Wait(m.runCtx) != nil {
		return nil
	}
	held := make([]store.Ownership, len(batch))
	for i, q := range batch {
		held[i] = store.Ownership{Partition: q.sl.claim.Partition, Epoch: q.sl.claim.Epoch}
	}
	ctx, cancel := context.WithTimeout(m.runCtx, m.cfg.RenewTimeout)
	defer cancel()
	errs, err := m.st.ReleaseBatch(ctx, m.cfg.Group, sess.id, held)
	if err == nil && len(errs) != len(held) {
		err = errors.New("the store answered a different number of results")
	}
	switch {
	case errors.Is(err, store.ErrCorrupt):
		// The group's keys broke (by hand): the read the member makes
		// now reports it, once for all its calls.
		m.log.Debug("release failed; the partitions free when the session ends", "partitions", len(held), "err", err)
		m.rep.distrust()
		return nil
	case errors.Is(err, store.ErrSessionExpired):
		return nil // the session ended: its records are free
	case err != nil:
		m.log.Warn("release failed; retrying", "partitions", len(held), "err", err)
		failed = make(map[*slot]bool, len(batch))
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
		case errors.Is(e, store.ErrCorrupt):
			// Its record broke (by hand): the read the member makes now
			// reports it, once for all its calls.
			m.log.Debug("release failed; the partition frees when the session ends", "partition", held[i].Partition, "err", e)
			corrupt = true
		default:
			m.log.Warn("release failed; retrying", "partition", held[i].Partition, "err", e)
			if failed == nil {
				failed = map[*slot]bool{}
			}
			failed[batch[i].sl] = true
		}
	}
	m.noteReleased(done)
	if corrupt {
		m.rep.distrust()
	}
	return failed
}
