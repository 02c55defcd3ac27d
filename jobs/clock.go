package jobs

import (
	"time"
)

// Slots are due by the owner's wall clock, which may be stepped (by NTP,
// an operator, a VM restored) while a key waits. Everything that decides
// when a key runs reads the wall clock through wall; what decides whether
// it may run (the session's fence time, mayStart, fenceContext) reads the
// monotonic clock through time.Now and is not moved by a step.
//
//   - A wait for a due time re-reads the wall clock at least every
//     wallRecheck: a step forward makes the key run (its latest slot, the
//     skipped ones counted as missed) within wallRecheck of the step, not a
//     whole period later; a step back makes it wait for the clock to come
//     back to the slot instead of running it early.
//   - A member whose clock steps back does not run again the slots it ran:
//     its own record is not taken for skew (skewed) while it owns the key,
//     so the key waits for the clock to reach its next slot.

// wallRecheck bounds one wait on a timer before the wall clock is read
// again: how late a key may notice a step of the wall clock.
const wallRecheck = time.Minute

// wall reads the member's wall clock.
func (s *Scheduler) wall() time.Time {
	if s.cfg.now != nil {
		return s.cfg.now()
	}
	return time.Now()
}
