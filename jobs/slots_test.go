package jobs_test

import (
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/herdhq/herd/jobs"
	"github.com/herdhq/herd/store"
)

// The whole fleet is down for a day: when it comes back each key runs once,
// at once, for the latest due slot, with the skipped slots counted on the
// run and the record; then it follows its schedule again.
func TestScenarioMissedSlots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		f := newFleet(t, ctx, jobs.Config{Every: 10 * time.Minute})
		f.runFor = func(string, jobs.Run) time.Duration { return time.Second }
		ks := keys("k", 20)
		f.start(1, ks)
		f.start(1, nil)
		time.Sleep(time.Hour)
		f.leaveAll()
		before := map[string]jobs.Record{}
		for _, k := range ks {
			before[k] = f.record(k)
		}
		time.Sleep(24 * time.Hour)
		back := time.Now()
		seen := len(f.events())
		f.start(2, nil)
		time.Sleep(time.Minute)
		first := map[string]runEvent{}
		for _, e := range f.events()[seen:] {
			if p, dup := first[e.run.Key]; dup {
				// Only its regular next slot may follow within the minute.
				if e.run.Missed != 0 || e.run.Slot.Sub(p.run.Slot) != 10*time.Minute {
					t.Errorf("key %s ran twice in the minute after the fleet came back: %+v then %+v", e.run.Key, p.run, e.run)
				}
				continue
			}
			first[e.run.Key] = e
		}
		for _, k := range ks {
			e, ok := first[k]
			if !ok {
				t.Errorf("key %s did not run in the minute after the fleet came back", k)
				continue
			}
			if late := e.start.Sub(back); late > 5*time.Second {
				t.Errorf("key %s ran %v after the fleet came back; want at once", k, late)
			}
			if e.run.Slot.After(back) || back.Sub(e.run.Slot) > 10*time.Minute || e.run.Attempt != 1 {
				t.Errorf("key %s ran slot %v attempt %d; want the latest slot before %v", k, e.run.Slot, e.run.Attempt, back)
			}
			// About 24 hours of 10-minute slots, less the one run now.
			if e.run.Missed < 142 || e.run.Missed > 145 {
				t.Errorf("key %s: %d slots missed; want about 143", k, e.run.Missed)
			}
			if r := f.record(k); r.Missed != before[k].Missed+e.run.Missed {
				t.Errorf("key %s: record counts %d missed, was %d before, the run says %d", k, r.Missed, before[k].Missed, e.run.Missed)
			}
		}
		// Back on schedule: one run per key in each of the next 10-minute
		// periods, none late.
		seen = len(f.events())
		time.Sleep(30 * time.Minute)
		per := map[string]int{}
		for _, e := range f.events()[seen:] {
			per[e.run.Key]++
			if e.run.Missed != 0 || e.start.Sub(e.run.Slot) > time.Second {
				t.Errorf("after catching up: %+v started %v late", e.run, e.start.Sub(e.run.Slot))
			}
		}
		for _, k := range ks {
			if per[k] < 2 || per[k] > 4 {
				t.Errorf("key %s ran %d times in the 30 minutes after catching up; want 3 ± 1", k, per[k])
			}
		}
		f.leaveAll()
		f.noOverlaps()
	})
}

// Keys added at run time start running at their slots; removed keys stop.
func TestScenarioKeysChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		f := newFleet(t, ctx, jobs.Config{Every: 10 * time.Minute})
		f.runFor = func(string, jobs.Run) time.Duration { return 5 * time.Second }
		f.start(1, keys("a", 10))
		ids := f.start(1, nil)
		time.Sleep(30 * time.Minute)
		newKeys := append(keys("a", 10)[5:], keys("b", 5)...)
		if err := f.member(ids[0]).s.SetKeys(ctx, newKeys); err != nil {
			t.Fatal(err)
		}
		changed := time.Now()
		seen := len(f.events())
		time.Sleep(time.Hour)
		per := map[string]int{}
		for _, e := range f.events()[seen:] {
			per[e.run.Key]++
		}
		for _, k := range keys("a", 5) {
			if per[k] != 0 {
				t.Errorf("removed key %s ran %d times after the change", k, per[k])
			}
		}
		for _, k := range newKeys {
			if per[k] < 5 || per[k] > 7 {
				t.Errorf("key %s ran %d times in the hour after the change; want 6 ± 1", k, per[k])
			}
		}
		if r := f.record("a000"); r.Runs < 2 || r.Running {
			t.Errorf("removed key a000 keeps its record: %+v", r)
		}
		// The removed keys' handlers are gone: a run under way at the
		// change was cancelled, none starts later.
		for _, e := range f.events() {
			if e.run.Key < "a005" && e.stop.After(changed) && !e.start.Before(changed) {
				t.Errorf("removed key ran after the change: %+v", e)
			}
		}
		f.leaveAll()
		f.noOverlaps()
	})
}

// MaxConcurrent bounds the runs under way on a member: 20 keys due at the
// same instant (no spread) on one member with MaxConcurrent 3 run at most 3
// at a time, one after another.
func TestMaxConcurrent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		f := newFleet(t, ctx, jobs.Config{Every: 10 * time.Minute, NoSpread: true, MaxConcurrent: 3})
		f.runFor = func(string, jobs.Run) time.Duration { return 10 * time.Second }
		f.start(1, keys("k", 20))
		time.Sleep(10*time.Minute + 75*time.Second)
		peak := 0
		f.mu.Lock()
		evs := append([]runEvent(nil), f.runs...)
		f.mu.Unlock()
		for _, e := range evs {
			n := 0
			for _, o := range evs {
				if !o.start.After(e.start) && (o.stop.IsZero() || o.stop.After(e.start)) {
					n++
				}
			}
			peak = max(peak, n)
		}
		if peak != 3 {
			t.Errorf("at most %d runs at once; want 3", peak)
		}
		if len(evs) != 20 {
			t.Fatalf("%d runs in the first slot; want 20", len(evs))
		}
		// 20 runs of 10 s, 3 at a time: 7 rounds, the last starting 60 s late.
		for _, e := range evs {
			if late := e.start.Sub(e.run.Slot); late > 61*time.Second {
				t.Errorf("run of %s started %v late", e.run.Key, late)
			}
		}
		f.leaveAll()
	})
}

// A failing run is retried with a growing back-off; its error stays on the
// record; a success ends the retries and the key is back on schedule.
func TestRetryAfterFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		f := newFleet(t, ctx, jobs.Config{Every: time.Hour, RetryDelay: 10 * time.Second, RetryMax: 40 * time.Second})
		f.fail = func(r jobs.Run) error {
			if r.Attempt <= 3 {
				return fmt.Errorf("feed down (attempt %d)", r.Attempt)
			}
			return nil
		}
		f.start(1, []string{"k"})
		var evs []runEvent
		for len(evs) < 4 {
			time.Sleep(time.Second)
			evs = f.events()
		}
		if r := f.record("k"); r.Result != jobs.ResultOK && !r.Running {
			t.Errorf("record after the success: %+v", r)
		}
		// Pauses: 10 s, 20 s, 40 s, each less up to half.
		for i, want := range []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second} {
			gap := evs[i+1].start.Sub(evs[i].stop)
			if gap < want/2 || gap > want || evs[i+1].run.Attempt != i+2 || !evs[i+1].run.Slot.Equal(evs[0].run.Slot) {
				t.Errorf("retry %d: %+v after %v; want attempt %d of the same slot after %v to %v", i+1, evs[i+1].run, gap, i+2, want/2, want)
			}
		}
		time.Sleep(time.Second)
		r := f.record("k")
		if r.Result != jobs.ResultOK || r.Failures != 3 || r.Runs != 4 || r.Error != "" || r.Retry ||
			!r.NextDue.Equal(evs[0].run.Slot.Add(time.Hour)) {
			t.Errorf("record after three failures and a success: %+v", r)
		}
		f.leaveAll()
	})
}

// The error of a failed run stays on the record until the next run.
func TestFailureOnRecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		f := newFleet(t, ctx, jobs.Config{Every: time.Minute, RetryDelay: time.Hour})
		f.fail = func(jobs.Run) error { return errors.New("feed down") }
		f.start(1, []string{"k"})
		time.Sleep(61 * time.Second)
		r := f.record("k")
		if r.Result != jobs.ResultError || r.Error != "feed down" || r.Retry || r.Failures != 1 || r.Running {
			t.Errorf("record after a failure whose retry comes after the next slot: %+v", r)
		}
		f.leaveAll()
	})
}

// A record that is not a job record (written by hand, or by another program)
// does not stop the key: it starts afresh and the record is replaced.
func TestBadRecordStartsAfresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		f := newFleet(t, ctx, jobs.Config{Every: time.Minute})
		// Write a bad checkpoint as the key's owner would.
		sess, err := f.st.OpenSession(ctx, f.group, "writer", 1, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.st.SetPartitions(ctx, f.group, store.PartitionSet{Partitions: []store.Partition{{ID: "k"}}}); err != nil {
			t.Fatal(err)
		}
		o, err := store.Claim(ctx, f.st, f.group, "k", sess)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.st.Checkpoint(ctx, f.group, "k", o.Epoch, []byte("not a record")); err != nil {
			t.Fatal(err)
		}
		if err := f.st.CloseSession(ctx, f.group, sess); err != nil {
			t.Fatal(err)
		}
		f.start(1, nil)
		time.Sleep(2 * time.Minute)
		if n := len(f.events()); n < 1 {
			t.Errorf("key with a bad record ran %d times", n)
		}
		if r := f.record("k"); r.Runs < 1 {
			t.Errorf("record not replaced: %+v", r)
		}
		f.leaveAll()
	})
}

// A member stopped (as by SIGSTOP) past its TTL loses its keys to another
// member; when it resumes, it never starts a slot of a key it lost: the
// "running" write is refused first.
func TestStalledMemberStartsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		logs := newLogCounter()
		f := newFleet(t, ctx, jobs.Config{Every: time.Minute, NoSpread: true, Logger: slog.New(logs)})
		f.runFor = func(string, jobs.Run) time.Duration { return time.Second }
		ks := keys("k", 10)
		f.start(1, ks)
		f.start(1, nil)
		// Just after a run, before the next slot at the minute.
		time.Sleep(2*time.Minute + 5*time.Second)
		stalled := f.member("m1")
		held := stalled.s.Member().Owned()
		if len(held) == 0 {
			t.Fatal("m1 owns nothing")
		}
		stalled.gate.Pause()
		pausedAt := time.Now()
		time.Sleep(2 * time.Minute) // past its TTL, and past slots of its keys
		stalled.gate.Resume()
		time.Sleep(2 * time.Minute)
		for _, e := range f.events() {
			if e.member == "m1" && e.start.After(pausedAt) {
				for _, k := range held {
					if e.run.Key == k && e.start.Before(pausedAt.Add(2*time.Minute+time.Second)) {
						t.Errorf("the stalled member started %s (slot %v) at %v, after it lost the key", k, e.run.Slot, e.start.Sub(pausedAt))
					}
				}
			}
		}
		// The others ran the stalled member's keys meanwhile.
		for _, k := range held {
			ran := false
			for _, e := range f.events() {
				ran = ran || (e.run.Key == k && e.member != "m1" && e.start.After(pausedAt))
			}
			if !ran {
				t.Errorf("key %s of the stalled member did not run elsewhere", k)
			}
		}
		// It did try: its timers fired while it was stopped, and each
		// "running" write was refused when it resumed.
		if n := logs.n("the key has another owner, or is being handed off: the run does not start"); n < len(held) {
			t.Errorf("%d refused starts logged; want one per key the stalled member held (%d)", n, len(held))
		}
		f.leaveAll()
		f.noOverlaps()
	})
}
