package jobs

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"time"

	"github.com/herdhq/herd"
)

// pending is the next run a key's owner is to make.
type pending struct {
	slot      time.Time // the slot it is for (zero: the key has no more slots)
	attempt   int
	notBefore time.Time // a retry's back-off, or a failed record write's
	takeover  bool      // the previous owner stopped in the middle of a run of slot
	failed    int       // record writes that failed in a row
	requested bool      // a run on request (store.RequestRun): slot is when it was asked for
}

// due is when the run may start.
func (p pending) due() time.Time {
	if p.notBefore.After(p.slot) {
		return p.notBefore
	}
	return p.slot
}

// keyRun is what the owner of one key keeps: its claim, its slots and its
// record as last written (or as found when the key was claimed).
type keyRun struct {
	s     *Scheduler
	c     *herd.Claim
	slots slots
	rec   Record
	// warned: a failed record write has been logged (once per claim).
	warned bool
	// prevOwner and prevEpoch wrote the record found at the claim.
	prevOwner string
	prevEpoch uint64
	// reqs brings the requests for the key (request.go).
	reqs <-chan string
}

// handle is the herd handler of one key: it runs the key's due slots for
// as long as this member owns it.
func (s *Scheduler) handle(c *herd.Claim) error {
	ctx := c.Context()
	sch := s.safeSchedule(c.Partition)
	if sch == nil {
		s.log.Error("key has no schedule (Config.Schedule returned nil, and neither Every nor Cron is set): it does not run", "key", c.Partition)
		<-ctx.Done()
		return nil
	}
	reqs, stopListening := s.listen(c.Partition)
	defer stopListening()
	k := &keyRun{s: s, c: c, slots: newSlots(sch, c.Partition, s.spreads(sch)), reqs: reqs}
	rec, err := DecodeRecord(c.LastCheckpoint())
	if err != nil {
		s.log.Warn("the key's record cannot be read; the key starts afresh and its next run replaces the record",
			"key", c.Partition, "err", err)
		rec = Record{}
	}
	k.rec, k.prevOwner, k.prevEpoch = rec, rec.Owner, rec.Epoch
	p := k.pendingFrom(rec, s.wall())
	if err == nil {
		k.announce(ctx, p)
	}
	ended := false
	for {
		due := p.due()
		if due.IsZero() && !ended {
			ended = true
			s.log.Info("the key's schedule has no more due times", "key", c.Partition)
		}
		if k.rec.Paused {
			due = time.Time{} // only a request wakes it
		}
		req, ok := k.wait(ctx, due) // due (forever if zero), or a request
		if !ok {
			return nil
		}
		if req != "" {
			next, runNow, owned := k.request(ctx, req, p)
			if !owned {
				<-ctx.Done() // herd cancels it: the key has another owner
				return nil
			}
			if p = next; !runNow {
				continue
			}
		}
		if !s.acquire(ctx) {
			return nil
		}
		next, owned := k.runOnce(ctx, p)
		<-s.sem
		if !owned {
			<-ctx.Done() // herd cancels it: the key has another owner
			return nil
		}
		p = next
	}
}

// spreads reports whether sch is spread by key: an interval (Every) unless
// Config.NoSpread, any schedule with Config.Spread.
func (s *Scheduler) spreads(sch Schedule) bool {
	if s.cfg.NoSpread {
		return false
	}
	_, every := sch.(Every)
	return every || s.cfg.Spread
}

// announce writes the next due time of a key that never ran into its
// record (one write, the first time an owner claims the key), so that the
// blackboard shows when it is due before its first run. A failure is not
// an error: the first run writes the record.
func (k *keyRun) announce(ctx context.Context, p pending) {
	rec := k.rec
	if !rec.Slot.IsZero() || rec.Running || p.slot.IsZero() || rec.NextDue.Equal(p.slot) {
		return
	}
	rec.V, rec.Owner, rec.Epoch, rec.NextDue = RecordVersion, k.s.member, k.c.Epoch, p.slot.UTC()
	if err := k.write(ctx, rec); err != nil {
		k.s.log.Debug("writing the next due time of a key that never ran failed", "key", k.c.Partition, "err", err)
		return
	}
	k.rec = rec
}

// safeSchedule is schedule, with a panic or a typed nil from
// Config.Schedule taken as no schedule of the key's own.
func (s *Scheduler) safeSchedule(key string) (sch Schedule) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("Config.Schedule panicked; the key follows Every or Cron", "key", key, "panic", fmt.Sprint(r))
			sch = s.def
		}
	}()
	sch = s.schedule(key)
	if sch != nil {
		if v := reflect.ValueOf(sch); v.Kind() == reflect.Pointer && v.IsNil() {
			return s.def
		}
	}
	return sch
}

// pendingFrom returns the next run from the key's record, on this member's
// schedule. The record's NextDue is not trusted for the next slot (the
// schedule may have changed since it was written), only for a retry's
// back-off.
func (k *keyRun) pendingFrom(rec Record, now time.Time) pending {
	if k.skewed(rec, now) {
		// Written by a clock ahead of ours: its slot and due time mean
		// nothing here. The next slot on this member's clock.
		s := k.slots.next(now)
		return pending{slot: s, attempt: 1, notBefore: s}
	}
	return k.pendingOf(rec, now)
}

// pendingOf is pendingFrom without the skew check, for a record this
// member wrote itself: ahead of its clock only if the clock stepped back
// since (clock.go), and then the key waits for the clock to reach its next
// slot rather than run again the slots it ran.
func (k *keyRun) pendingOf(rec Record, now time.Time) pending {
	switch {
	case rec.Slot.IsZero():
		// Never ran: its first slot from now on.
		s := k.slots.next(now)
		return pending{slot: s, attempt: 1, notBefore: s}
	case rec.Running:
		// Its owner stopped mid-run (crashed, or lost the key); every claim
		// has a new epoch, so the record is from an older one.
		return pending{slot: rec.Slot, attempt: rec.Attempt + 1, takeover: true}
	case rec.Retry:
		return pending{slot: rec.Slot, attempt: rec.Attempt + 1, notBefore: rec.NextDue}
	}
	s := k.slots.next(rec.Slot)
	return pending{slot: s, attempt: 1, notBefore: s}
}

// runOnce makes the run p, now due: it writes the record "running" (fenced),
// runs the key if that write went through, and writes the outcome
// (fenced). It returns the next run, and false once the key is known to
// have another owner (a write was refused).
func (k *keyRun) runOnce(ctx context.Context, p pending) (pending, bool) {
	s, c := k.s, k.c
	now := s.wall()
	r := Run{Key: c.Partition, Slot: p.slot, Attempt: p.attempt, Epoch: c.Epoch, Takeover: p.takeover, Requested: p.requested, claim: c}
	if last := k.slots.latest(now); !p.requested && last.After(p.slot) {
		// Later slots are due already: run the latest, once. The slots
		// before it that never started are missed; p.slot is not if it
		// was started already (a retry, an interruption, a takeover), and
		// it is not run again, so this is no takeover.
		r.Missed = k.slots.count(p.slot, last)
		if (p.attempt > 1 || p.takeover) && r.Missed > 0 {
			r.Missed--
		}
		r.Slot, r.Attempt, r.Takeover = last, 1, false
		s.log.Info("slots missed: running the latest one once", "key", c.Partition, "missed", r.Missed, "slot", last,
			"superseded_slot", p.slot, "superseded_attempt", p.attempt)
	}
	r.Period = k.slots.period(r.Slot)

	rec := k.rec
	rec.V, rec.Owner, rec.Epoch, rec.Running = RecordVersion, s.member, c.Epoch, true
	rec.Slot, rec.Attempt, rec.LastStart = r.Slot, r.Attempt, now.UTC()
	rec.Missed += r.Missed
	if r.Takeover {
		rec.Takeovers++
	}
	rec.NextDue, rec.Retry = time.Time{}, false
	if err := k.write(ctx, rec); err != nil {
		if errors.Is(err, herd.ErrNotOwner) || ctx.Err() != nil {
			s.log.Debug(msgNotStarted, "key", c.Partition, "slot", r.Slot, "err", err)
			return p, false
		}
		// Not written (or written without our knowing): not started.
		// Try again after a pause; the next write replaces this one.
		p.failed++
		p.notBefore = s.wall().Add(writeBackoff(p.failed))
		if !k.warned {
			k.warned = true
			s.log.Warn("writing the key's record failed: the run does not start; trying again (further failures of this key are not logged)",
				"key", c.Partition, "slot", r.Slot, "after", p.notBefore.Sub(s.wall()).Round(time.Millisecond), "err", err)
		}
		return p, true
	}
	if !mayStart(c) {
		// Stopped after the write, past the session's fence time (fence.go):
		// the key may have another owner, who runs the slot. If the session
		// lives on (a renewal was under way), the next "running" write goes
		// through and the run starts then; if not, it is refused.
		s.log.Debug(msgNotStarted, "key", c.Partition, "slot", r.Slot, "err", errFenced)
		p.notBefore = s.wall().Add(writeBackoff(1))
		return p, true
	}
	k.rec = rec
	if r.Takeover {
		s.met.tookOver()
		s.log.Info("the key's previous owner stopped during a run: running its slot again now",
			"key", c.Partition, "slot", r.Slot, "previous_owner", k.prevOwner, "previous_epoch", k.prevEpoch, "epoch", c.Epoch)
	}
	s.met.skipped(r.Missed)
	s.met.started(s.wall().Sub(r.Slot).Seconds(), r.Attempt == 1) // lateness: when Run starts, after the write
	s.log.Debug("run started", "key", c.Partition, "slot", r.Slot, "attempt", r.Attempt, "epoch", c.Epoch)

	rctx, stopFence := fenceContext(ctx, c)
	err := s.call(rctx, r)
	stopFence()

	stop := s.wall()
	rec.Running, rec.LastStop = false, stop.UTC()
	rec.Runs++
	rec.Error = ""
	switch {
	case err == nil:
		rec.Result = ResultOK
		rec.NextDue = k.slots.next(r.Slot)
	case ctx.Err() != nil || fenced(rctx):
		// Handed off or lost mid-run (or past the fence time): the next
		// owner runs the slot again at once.
		rec.Result, rec.Error, rec.Retry, rec.NextDue = ResultInterrupted, err.Error(), true, rec.LastStop
	default:
		rec.Result, rec.Error = ResultError, err.Error()
		rec.Failures++
		retry := stop.Add(s.backoff(r.Attempt)).UTC()
		next := k.slots.next(r.Slot)
		if next.IsZero() || retry.Before(next) {
			rec.Retry, rec.NextDue = true, retry
		} else {
			rec.NextDue = next
		}
		s.log.Warn("run failed", "key", c.Partition, "slot", r.Slot, "attempt", r.Attempt, "err", err,
			"retry", rec.Retry, "next_due", rec.NextDue)
	}
	s.met.ended(rec.Result)
	s.log.Debug("run ended", "key", c.Partition, "slot", r.Slot, "result", rec.Result, "took", stop.Sub(now))
	k.rec = rec
	if err := k.finish(rec); err != nil && errors.Is(err, herd.ErrNotOwner) {
		return p, false
	}
	return k.pendingOf(rec, s.wall()), true
}

// msgNotStarted is logged when the "running" write is refused because the
// key has another owner, or was not made because it is being handed off.
const msgNotStarted = "the key has another owner, or is being handed off: the run does not start"

// finishTries bounds the attempts at writing a run's outcome; if they all
// fail, the record stays "running" in the store until the next run's write
// (or, if the key moves first, its next owner runs the slot again).
const finishTries = 4

// finish writes a run's outcome, with a context of its own (the run's may
// be cancelled by a handoff; herd bounds the write by the session's fence
// time), trying again a few times on errors other than ErrNotOwner.
func (k *keyRun) finish(rec Record) error {
	var err error
	for i := range finishTries {
		if i > 0 {
			select {
			case <-time.After(writeBackoff(i)):
			case <-k.c.SessionDone():
				return err
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), finishTimeout)
		err = k.write(ctx, rec)
		cancel()
		if err == nil || errors.Is(err, herd.ErrNotOwner) {
			return err
		}
	}
	if !k.warned {
		k.warned = true
		k.s.log.Warn("writing the outcome of a run failed: the store shows the key running until its next run "+
			"(further failures of this key are not logged)", "key", k.c.Partition, "slot", rec.Slot, "err", err)
	}
	return err
}

// finishTimeout bounds one write of a run's outcome.
const finishTimeout = 10 * time.Second

// write stores rec as the key's checkpoint, fenced by the claim's epoch.
func (k *keyRun) write(ctx context.Context, rec Record) error {
	b, err := rec.encode()
	if err != nil {
		return err
	}
	return k.c.Checkpoint(ctx, b)
}

// call runs Config.Run, bounded by Timeout, a panic turned into an error.
func (s *Scheduler) call(ctx context.Context, r Run) (err error) {
	rctx := ctx
	if s.cfg.Timeout > 0 {
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeout(ctx, s.cfg.Timeout)
		defer cancel()
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("jobs: the run of key %q panicked: %v", r.Key, p)
		}
		if err != nil && ctx.Err() == nil && errors.Is(rctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("jobs: the run of key %q timed out after %v: %w", r.Key, s.cfg.Timeout, err)
		}
	}()
	return s.cfg.Run(rctx, r)
}

// acquire takes one of the member's MaxConcurrent run tokens, or returns
// false if ctx ends first.
func (s *Scheduler) acquire(ctx context.Context) bool {
	select {
	case s.sem <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

// backoff is the pause before attempt n+1 of a slot after attempt n
// failed: RetryDelay doubled n-1 times, at most RetryMax, less up to half
// at random so that keys failing together do not retry together.
func (s *Scheduler) backoff(n int) time.Duration {
	d := s.cfg.RetryDelay
	for i := 1; i < n && d < s.cfg.RetryMax; i++ {
		d *= 2
	}
	d = min(d, s.cfg.RetryMax)
	return d/2 + rand.N(d/2+1)
}

// writeBackoff is the pause after n failed record writes in a row: 100ms
// doubled, at most 5s.
func writeBackoff(n int) time.Duration {
	d := 100 * time.Millisecond
	for i := 1; i < n && d < 5*time.Second; i++ {
		d *= 2
	}
	return min(d, 5*time.Second)
}
