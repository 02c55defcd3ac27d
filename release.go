package herd

// The releaser: partitions handed off are released in batches, so a member
// that leaves with thousands of partitions makes a few store calls, not one
// per partition.

import (
	"context"
	"errors"
	"sync"

	"github.com/herdhq/herd/store"
)

// releaser batches the releases of the member's slots. Handlers that return
// while a batch is in the store queue up, and the next batch takes them all
// (up to store.MaxBatch): batching costs no delay, a lone release is sent at
// once. Its goroutine (loop) is started and stopped by Member.run, which
// stops it only once every slot has returned.
type releaser struct {
	m     *Member
	mu    sync.Mutex
	queue []releaseReq
	wake  chan struct{} // capacity 1: there is something in queue
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
	select {
	case r.wake <- struct{}{}:
	default:
	}
	<-done
}

// loop sends the queued releases until stop is closed (then the queue is
// empty: every slot has returned).
func (r *releaser) loop(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	for {
		select {
		case <-r.wake:
		case <-stop:
			r.flush() // nothing should be left; never leave a waiter blocked
			return
		}
		r.flush()
	}
}

// flush sends everything queued, one batch (of one session's slots) at a time.
func (r *releaser) flush() {
	for {
		r.mu.Lock()
		if len(r.queue) == 0 {
			r.mu.Unlock()
			return
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
		r.send(sess, batch)
		for _, q := range batch {
			close(q.done)
		}
	}
}

// send releases one batch of slots of sess.
func (r *releaser) send(sess *session, batch []releaseReq) {
	m := r.m
	// Released through the member's run context, not the session's (already
	// cancelled for the handoff): the store still fences it by epoch.
	if m.cfg.Gate.wait(m.runCtx) != nil {
		return
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
	if err != nil {
		if errors.Is(err, store.ErrCorrupt) {
			// The group's keys broke (by hand): the read the member makes
			// now reports it, once for all its calls.
			m.log.Debug("release failed; the partitions free when the session ends", "partitions", len(held), "err", err)
			m.rep.distrust()
			return
		}
		m.log.Warn("release failed; the partitions free when the session ends", "partitions", len(held), "err", err)
		return
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
			m.log.Warn("release failed; the partition frees when the session ends", "partition", held[i].Partition, "err", e)
		}
	}
	m.noteReleased(done)
	if corrupt {
		m.rep.distrust()
	}
}
