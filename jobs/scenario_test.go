package jobs_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/jobs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Three members, 200 keys every 10 minutes, 24 simulated hours: every key
// runs 144 times (±1), never twice at once, and the runs are spread evenly
// over the members.
func TestScenarioDay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		// MaxConcurrent high enough that no run waits for a turn: this
		// test checks that runs start on time (TestMaxConcurrent checks
		// the bound).
		f := newFleet(t, ctx, jobs.Config{Every: 10 * time.Minute, MaxConcurrent: 40})
		// Runs take 1 to 60 s, by key.
		f.runFor = func(key string, _ jobs.Run) time.Duration {
			n, _ := strconv.Atoi(strings.TrimPrefix(key, "city-"))
			return time.Duration(1+n*7%60) * time.Second
		}
		ks := keys("city-", 200)
		began := time.Now()
		f.start(1, ks)
		f.start(2, nil)
		time.Sleep(24*time.Hour - time.Since(began))
		end := time.Now()
		f.leaveAll()
		f.noOverlaps()

		perKey := map[string]int{}
		perMember := map[string]int{}
		for _, e := range f.events() {
			perKey[e.run.Key]++
			perMember[e.member]++
			if e.err != nil && !(errors.Is(e.err, context.Canceled) && !e.stop.Before(end)) {
				t.Errorf("run %+v failed: %v", e.run, e.err)
			}
			if late := e.start.Sub(e.run.Slot); late < 0 || late > time.Second {
				t.Errorf("run of %s for slot %v started %v late", e.run.Key, e.run.Slot, late)
			}
		}
		for _, k := range ks {
			if n := perKey[k]; n < 143 || n > 145 {
				t.Errorf("key %s ran %d times in 24 hours; want 144 ± 1", k, n)
			}
		}
		lo, hi := 1<<30, 0
		for _, n := range perMember {
			lo, hi = min(lo, n), max(hi, n)
		}
		if len(perMember) != 3 || float64(hi) > 1.2*float64(lo) {
			t.Errorf("runs per member %v: want 3 members within 20%%", perMember)
		}
		t.Logf("runs per member: %v", perMember)
		r := f.record(ks[0])
		if r.Running || r.Result != jobs.ResultOK || r.Runs < 143 || r.Missed != 0 {
			t.Errorf("record of %s after the day: %+v", ks[0], r)
		}
	})
}

// A member crashes (Start's context cancelled) while runs are under way:
// each is run again, for the same slot, by another member within TTL + 1 s,
// and never while the crashed run was still under way.
func TestScenarioCrashMidRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		f := newFleet(t, ctx, jobs.Config{Every: 10 * time.Minute})
		f.runFor = func(string, jobs.Run) time.Duration { return 3 * time.Minute }
		f.start(1, keys("k", 30))
		f.start(2, nil)
		time.Sleep(25 * time.Minute)
		var crashed map[string]jobs.Run
		for len(crashed) < 2 {
			time.Sleep(10 * time.Second)
			crashed = f.runningOn("m1")
		}
		crashAt := time.Now()
		f.crash("m1")
		ttl := herd.DefaultSessionTTL
		time.Sleep(ttl + time.Second)
		again := map[string]runEvent{}
		for _, e := range f.events() {
			if _, ok := crashed[e.run.Key]; ok && e.member != "m1" && e.start.After(crashAt) && e.run.Takeover {
				again[e.run.Key] = e
			}
		}
		for k, r := range crashed {
			e, ok := again[k]
			switch {
			case !ok:
				t.Errorf("key %s (slot %v) running on the crashed member was not run again within TTL + 1 s", k, r.Slot)
			case !e.run.Slot.Equal(r.Slot) || e.run.Attempt != r.Attempt+1:
				t.Errorf("key %s taken over as slot %v attempt %d; want slot %v attempt %d", k, e.run.Slot, e.run.Attempt, r.Slot, r.Attempt+1)
			default:
				t.Logf("key %s taken over by %s %v after the crash", k, e.member, e.start.Sub(crashAt))
			}
		}
		time.Sleep(30 * time.Minute)
		f.leaveAll()
		f.noOverlaps()
		for k := range crashed {
			if r := f.record(k); r.Takeovers != 1 || r.Running {
				t.Errorf("record of %s: %+v; want one takeover, not running", k, r)
			}
		}
	})
}

// A member leaves gracefully while runs are under way: they are
// interrupted, their records say so, and another member runs each slot
// again at once.
func TestScenarioLeaveMidRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		f := newFleet(t, ctx, jobs.Config{Every: 10 * time.Minute})
		f.runFor = func(string, jobs.Run) time.Duration { return 3 * time.Minute }
		f.start(1, keys("k", 30))
		f.start(1, nil)
		time.Sleep(25 * time.Minute)
		var leaving map[string]jobs.Run
		for len(leaving) < 2 {
			time.Sleep(10 * time.Second)
			leaving = f.runningOn("m1")
		}
		leftAt := time.Now()
		fm := f.drop("m1")
		if err := fm.s.Leave(ctx); err != nil {
			t.Fatal(err)
		}
		fm.cancel()
		for k := range leaving {
			// m2 may have started it again already (the last result stays).
			if r := f.record(k); r.Result != jobs.ResultInterrupted || r.Error != "context canceled" {
				t.Errorf("record of %s after the leave: %+v; want interrupted", k, r)
			}
		}
		time.Sleep(time.Second)
		for _, e := range f.events() {
			if r, ok := leaving[e.run.Key]; ok && e.member == "m2" && !e.start.Before(leftAt) {
				if !e.run.Slot.Equal(r.Slot) || e.run.Attempt != 2 || e.run.Takeover {
					t.Errorf("key %s run again as %+v", e.run.Key, e.run)
				}
				delete(leaving, e.run.Key)
			}
		}
		if len(leaving) > 0 {
			t.Errorf("keys %v interrupted by the leave were not run again within 1 s", leaving)
		}
		f.leaveAll()
		f.noOverlaps()
	})
}
