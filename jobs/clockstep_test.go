package jobs_test

import (
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/herdhq/herd/jobs"
)

// stepFleet is a fleet of two members due every hour (no spread), each run
// lasting runFor, m1's wall clock offset by step (m2's is right), with the
// keys m1 owned and their epochs once the fleet had settled.
type stepFleet struct {
	*fleet
	step   atomic.Int64 // m1's wall clock minus the real one
	owned  []string     // m1's keys
	epochs map[string]uint64
}

func newStepFleet(t *testing.T, runFor time.Duration) *stepFleet {
	f := &stepFleet{fleet: newFleet(t, t.Context(), jobs.Config{Every: time.Hour, NoSpread: true})}
	f.runFor = func(string, jobs.Run) time.Duration { return runFor }
	f.clock = func(member string) func() time.Time {
		if member != "m1" {
			return nil
		}
		return func() time.Time { return time.Now().Add(time.Duration(f.step.Load())) }
	}
	f.start(1, keys("k", 10))
	f.start(1, nil)
	time.Sleep(time.Minute)
	f.owned = f.member("m1").s.Member().Owned()
	if len(f.owned) == 0 || len(f.owned) == 10 {
		t.Fatalf("m1 owns %d of 10 keys; want a share", len(f.owned))
	}
	f.epochs = f.epochsOf("m1")
	return f
}

func (f *stepFleet) epochsOf(member string) map[string]uint64 {
	m := f.member(member).s.Member()
	out := map[string]uint64{}
	for _, k := range m.Owned() {
		out[k] = m.KnownEpoch(k)
	}
	return out
}

// check fails the test if a guarantee was broken: two runs of a key at
// once, a slot run twice, a run started before its slot on its member's
// clock, m1's session lost, or one of its keys moved or claimed again.
func (f *stepFleet) check() {
	t := f.t
	t.Helper()
	f.noOverlaps()
	seen := map[string]runEvent{}
	for _, e := range f.events() {
		id := fmt.Sprintf("%s@%v", e.run.Key, e.run.Slot)
		if p, dup := seen[id]; dup {
			t.Errorf("key %s slot %v ran twice: by %s at %v and by %s at %v (their wall clocks)",
				e.run.Key, e.run.Slot, p.member, p.wall, e.member, e.wall)
		}
		seen[id] = e
		if e.wall.Before(e.run.Slot) {
			t.Errorf("key %s slot %v started early, at %v on %s's wall clock", e.run.Key, e.run.Slot, e.wall, e.member)
		}
	}
	m := f.member("m1").s.Member()
	if !m.SessionLive() {
		t.Error("m1's session is not live after its wall clock stepped")
	}
	if got := f.epochsOf("m1"); !maps(got, f.epochs) {
		t.Errorf("m1's keys and epochs changed after its wall clock stepped: %v; were %v", got, f.epochs)
	}
}

func maps(a, b map[string]uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// runsOf returns the runs of m1's keys that started in [from, to).
func (f *stepFleet) runsOf(from, to time.Time) map[string][]jobs.Run {
	out := map[string][]jobs.Run{}
	for _, e := range f.events() {
		if slices.Contains(f.owned, e.run.Key) && !e.start.Before(from) && e.start.Before(to) {
			out[e.run.Key] = append(out[e.run.Key], e.run)
		}
	}
	return out
}

// A member's wall clock steps an hour forward in the middle of a wait,
// then back an hour (the step corrected): it keeps its session and its
// keys (same epochs), runs the slot its clock now shows due within
// wallRecheck of each step (not a period later), never a slot early by its
// clock nor twice, and the other member's keys are not disturbed.
func TestWallClockStepForwardThenBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStepFleet(t, time.Second)
		start := time.Now().Truncate(time.Hour) // the first slot, 00:00
		time.Sleep(start.Add(35 * time.Minute).Sub(time.Now()))
		f.step.Store(int64(time.Hour)) // 00:35 reads 01:35 on m1
		stepped := time.Now()
		time.Sleep(2 * time.Minute)
		for _, k := range f.owned {
			runs := f.runsOf(stepped, time.Now())[k]
			if len(runs) != 1 || !runs[0].Slot.Equal(start.Add(time.Hour)) || runs[0].Missed != 0 {
				t.Errorf("key %s after m1's clock stepped forward to 01:35: runs %+v; want slot 01:00 once within a minute", k, runs)
			}
		}
		time.Sleep(start.Add(70 * time.Minute).Sub(time.Now()))
		f.step.Store(0) // 01:10 (02:10 on m1, which ran its 02:00 slots) reads 01:10 again
		time.Sleep(start.Add(3*time.Hour + 30*time.Minute).Sub(time.Now()))
		f.check()
		// Back on schedule: m1's keys run 03:00 as 03:00 comes.
		for _, k := range f.owned {
			runs := f.runsOf(start.Add(3*time.Hour), start.Add(3*time.Hour+time.Minute))[k]
			if len(runs) != 1 || !runs[0].Slot.Equal(start.Add(3*time.Hour)) {
				t.Errorf("key %s at 03:00, after m1's clock stepped back: runs %+v; want slot 03:00 once", k, runs)
			}
		}
		f.leaveAll()
	})
}

// A member's wall clock steps an hour back in the middle of a wait: it
// keeps its session and its keys (same epochs), runs no slot early by its
// clock nor twice, and runs each key's next slot when its clock reaches it.
func TestWallClockStepBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStepFleet(t, time.Second)
		start := time.Now().Truncate(time.Hour)
		time.Sleep(start.Add(35 * time.Minute).Sub(time.Now()))
		f.step.Store(int64(-time.Hour)) // 00:35 reads 23:35 on m1
		time.Sleep(start.Add(3*time.Hour + 30*time.Minute).Sub(time.Now()))
		f.check()
		for _, k := range f.owned {
			// 01:00 on m1's clock is 02:00.
			runs := f.runsOf(start.Add(2*time.Hour), start.Add(2*time.Hour+time.Minute))[k]
			if len(runs) != 1 || !runs[0].Slot.Equal(start.Add(time.Hour)) {
				t.Errorf("key %s when m1's clock reached 01:00 again: runs %+v; want slot 01:00 once", k, runs)
			}
		}
		f.leaveAll()
	})
}

// A member's wall clock steps an hour back while its runs are under way:
// the records it writes at their end are ahead of its clock, but they are
// its own, not a skewed writer's: it runs none of those slots again, and
// runs each key's next slot when its clock reaches it.
func TestWallClockStepBackDuringARun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newStepFleet(t, 10*time.Minute)
		start := time.Now().Truncate(time.Hour)
		time.Sleep(start.Add(time.Hour + 5*time.Minute).Sub(time.Now()))
		f.step.Store(int64(-time.Hour)) // 01:05, in the 01:00 runs, reads 00:05 on m1
		time.Sleep(start.Add(4*time.Hour + 30*time.Minute).Sub(time.Now()))
		f.check()
		for _, k := range f.owned {
			// 02:00 on m1's clock is 03:00.
			runs := f.runsOf(start.Add(3*time.Hour), start.Add(3*time.Hour+time.Minute))[k]
			if len(runs) != 1 || !runs[0].Slot.Equal(start.Add(2*time.Hour)) {
				t.Errorf("key %s when m1's clock reached 02:00 again: runs %+v; want slot 02:00 once", k, runs)
			}
		}
		f.leaveAll()
	})
}
