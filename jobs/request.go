package jobs

import (
	"context"
	"errors"
	"time"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/store"
)

// Requests for keys (store.RequestRun, RequestPause, RequestResume) reach
// the scheduler through the group's log, which its herd member follows
// anyway (see store.Request): the member hands each to onRequest, which
// passes it to the handler of the key if this member runs it, and drops
// it otherwise (the key's owner, another member, acts on it; a key nobody
// owns at that moment ignores it). The handler acts under its claim's
// epoch: a pause is written into the key's record (Record.Paused), so that
// the key's next owner keeps it paused.

// keyRequests is how many requests of one key wait for its handler at
// most; more, sent while a run is under way, are dropped and logged.
const keyRequests = 8

// onRequest receives every request the member's log reader reads. It must
// not block: it only queues.
func (s *Scheduler) onRequest(r store.Request) {
	if r.Action == store.RequestLeave {
		return // the member acts on it itself
	}
	v, ok := s.requests.Load(r.Partition)
	if !ok {
		return
	}
	select {
	case v.(chan string) <- r.Action:
		s.log.Info("request received for a key this member runs", "key", r.Partition, "action", r.Action)
	default:
		s.log.Warn("request for a key dropped: too many wait for its run to end", "key", r.Partition, "action", r.Action)
	}
}

// listen makes key's handler the receiver of the key's requests until the
// returned function is called.
func (s *Scheduler) listen(key string) (<-chan string, func()) {
	ch := make(chan string, keyRequests)
	s.requests.Store(key, ch)
	return ch, func() { s.requests.CompareAndDelete(key, ch) }
}

// wait waits until the wall clock reaches t (forever if t is zero) or a
// request comes, and returns the request ("" for t reached); ok is false
// if ctx ends first.
func (k *keyRun) wait(ctx context.Context, t time.Time) (req string, ok bool) {
	tm := time.NewTimer(time.Hour)
	defer tm.Stop()
	for {
		if !t.IsZero() {
			d := t.Sub(k.s.wall())
			if d <= 0 {
				return "", ctx.Err() == nil
			}
			tm.Reset(min(d, wallRecheck))
		}
		select {
		case req := <-k.reqs:
			return req, true
		case <-tm.C:
		case <-ctx.Done():
			return "", false
		}
	}
}

// setPaused writes the key's record paused or not, under the claim's
// epoch. It reports false once the key is known to have another owner.
func (k *keyRun) setPaused(ctx context.Context, paused bool) bool {
	if k.rec.Paused == paused {
		return true
	}
	rec := k.rec
	rec.V, rec.Owner, rec.Epoch, rec.Paused = RecordVersion, k.s.member, k.c.Epoch, paused
	if err := k.write(ctx, rec); err != nil {
		if errors.Is(err, herd.ErrNotOwner) || ctx.Err() != nil {
			return false
		}
		k.s.log.Warn("writing the key's record failed: the request is not applied (send it again)",
			"key", k.c.Partition, "paused", paused, "err", err)
		return true
	}
	k.rec = rec
	if paused {
		k.s.log.Info("key paused on request: its scheduled runs are skipped until it is resumed", "key", k.c.Partition)
	} else {
		k.s.log.Info("key resumed on request: it runs from its next slot on", "key", k.c.Partition)
	}
	return true
}

// request acts on a request for the key, with p its pending run. It
// returns the next pending run and whether to run it now (a request to
// run), or false for owned once the key has another owner.
func (k *keyRun) request(ctx context.Context, req string, p pending) (next pending, runNow, owned bool) {
	switch req {
	case store.RequestPause:
		return p, false, k.setPaused(ctx, true)
	case store.RequestResume:
		if !k.rec.Paused {
			return p, false, true
		}
		if !k.setPaused(ctx, false) {
			return p, false, false
		}
		if p.takeover || p.attempt > 1 {
			return p, false, true // an interrupted or failed slot is run again still
		}
		// The slots that passed while paused are skipped, not missed:
		// the key runs from its next slot on.
		s := k.slots.next(k.s.wall())
		return pending{slot: s, attempt: 1, notBefore: s}, false, true
	case store.RequestRun:
		now := k.s.wall()
		k.s.log.Info("running the key now on request", "key", k.c.Partition, "paused", k.rec.Paused)
		return pending{slot: now, attempt: 1, notBefore: now, requested: true}, true, true
	}
	return p, false, true
}
