package sim

import (
	"container/heap"
	"time"
)

// Scheduler is the virtual clock of one run: a queue of timed events,
// executed in time order (ties in the order they were scheduled), one at a
// time, on the goroutine that calls RunUntil. Virtual time only moves when
// RunUntil moves it, so a ten-minute scenario of a thousand members takes
// as long as the events in it take to execute.
//
// Discrete-event fleets (the policy models) put all their behaviour on the
// Scheduler. A goroutine-based fleet (real member code) installs a Driver
// that advances its own virtual time (synctest's bubble clock, or a clock
// the member code reads) whenever the Scheduler moves, so scenario steps,
// samples and the fleet's goroutines see the same time.
type Scheduler struct {
	now    time.Duration
	q      eventQueue
	seq    uint64
	driver Driver
	events uint64
}

// Driver lets a goroutine-based fleet keep its own virtual time in step with
// the Scheduler.
type Driver interface {
	// AdvanceTo runs the fleet until virtual time t (t is never less than
	// the previous call's) and returns when every goroutine of the fleet
	// is idle at t, e.g. time.Sleep(t-elapsed) then synctest.Wait() inside
	// a synctest bubble.
	AdvanceTo(t time.Duration)
}

// NewScheduler returns a scheduler at virtual time 0.
func NewScheduler() *Scheduler { return &Scheduler{} }

// SetDriver installs d; it is called before every event that lies in the
// future of the current time and at the end of every RunUntil.
func (s *Scheduler) SetDriver(d Driver) { s.driver = d }

// Now is the current virtual time since the start of the run.
func (s *Scheduler) Now() time.Duration { return s.now }

// Events is the number of events executed so far.
func (s *Scheduler) Events() uint64 { return s.events }

// Timer is a scheduled event that can be cancelled.
type Timer struct {
	at        time.Duration
	seq       uint64
	fn        func()
	cancelled bool
	index     int
}

// Stop cancels the event if it has not run yet. It reports whether it did.
func (t *Timer) Stop() bool {
	if t == nil || t.cancelled || t.index < 0 {
		return false
	}
	t.cancelled = true
	return true
}

// At schedules fn at virtual time t (or now, if t is in the past).
func (s *Scheduler) At(t time.Duration, fn func()) *Timer {
	if t < s.now {
		t = s.now
	}
	s.seq++
	ev := &Timer{at: t, seq: s.seq, fn: fn}
	heap.Push(&s.q, ev)
	return ev
}

// After schedules fn d from now.
func (s *Scheduler) After(d time.Duration, fn func()) *Timer { return s.At(s.now+d, fn) }

// RunUntil executes every event due at or before t, in order, then sets the
// time to t. Events may schedule more events; those due by t run too.
func (s *Scheduler) RunUntil(t time.Duration) {
	for len(s.q) > 0 && s.q[0].at <= t {
		ev := heap.Pop(&s.q).(*Timer)
		if ev.cancelled {
			continue
		}
		if ev.at > s.now {
			if s.driver != nil {
				s.driver.AdvanceTo(ev.at)
			}
			s.now = ev.at
		}
		s.events++
		ev.fn()
	}
	if t > s.now {
		if s.driver != nil {
			s.driver.AdvanceTo(t)
		}
		s.now = t
	}
}

// Pending is the number of events in the queue (cancelled ones included
// until they are reached).
func (s *Scheduler) Pending() int { return len(s.q) }

type eventQueue []*Timer

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index = i
	q[j].index = j
}
func (q *eventQueue) Push(x any) {
	ev := x.(*Timer)
	ev.index = len(*q)
	*q = append(*q, ev)
}
func (q *eventQueue) Pop() any {
	old := *q
	n := len(old)
	ev := old[n-1]
	old[n-1] = nil
	ev.index = -1
	*q = old[:n-1]
	return ev
}
