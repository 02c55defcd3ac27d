package jobs_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/herdhq/herd/jobs"
	"github.com/herdhq/herd/store"
)

// runsOf counts the runs of key so far, and those made on request.
func (f *fleet) runsOf(key string) (all, requested int) {
	for _, e := range f.events() {
		if e.run.Key == key {
			all++
			if e.run.Requested {
				requested++
			}
		}
	}
	return all, requested
}

func (f *fleet) request(action, key string) {
	f.t.Helper()
	if err := f.st.Request(f.ctx, f.group, store.Request{Action: action, Partition: key}); err != nil {
		f.t.Fatal(err)
	}
}

// Requests through the group's log take effect on the key's owner: "run"
// runs the key at once, outside its schedule (Run.Requested); "pause"
// skips its scheduled runs, and is written into the key's record, so a
// new owner keeps the key paused; a run on request still runs while
// paused; "resume" has it run from its next slot on, the slots skipped
// while paused not counted as missed.
func TestRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		f := newFleet(t, ctx, jobs.Config{Every: 10 * time.Minute})
		f.start(1, keys("k", 2))
		time.Sleep(11 * time.Minute) // every key ran once
		key := "k000"
		before, _ := f.runsOf(key)
		if before != 1 {
			t.Fatalf("%s ran %d times in its first 11 minutes every 10; want 1", key, before)
		}

		f.request(store.RequestRun, key)
		time.Sleep(time.Second)
		if all, req := f.runsOf(key); all != before+1 || req != 1 {
			t.Fatalf("a second after a request to run %s: %d runs, %d on request; want %d and 1", key, all, req, before+1)
		}
		if rec := f.record(key); rec.Runs != uint64(before+1) || rec.Running {
			t.Fatalf("record after the run on request: %+v; want %d runs, not running", rec, before+1)
		}

		f.request(store.RequestPause, key)
		time.Sleep(time.Second)
		if rec := f.record(key); !rec.Paused {
			t.Fatalf("record after a request to pause: %+v; want paused", rec)
		}
		paused, _ := f.runsOf(key)
		time.Sleep(35 * time.Minute)
		if all, _ := f.runsOf(key); all != paused {
			t.Fatalf("%s ran %d times in 35 minutes while paused; want none", key, all-paused)
		}
		if all, _ := f.runsOf("k001"); all < 4 {
			t.Fatalf("k001, not paused, ran %d times in 46 minutes; want 4 or more", all)
		}

		// A run on request runs a paused key, which stays paused.
		f.request(store.RequestRun, key)
		time.Sleep(time.Second)
		if all, _ := f.runsOf(key); all != paused+1 {
			t.Fatalf("a request to run a paused key: %d runs; want 1", all-paused)
		}
		if rec := f.record(key); !rec.Paused {
			t.Fatalf("record after a run on request of a paused key: %+v; want still paused", rec)
		}

		// The key's next owner keeps it paused: the pause is in its record.
		f.crash("m1")
		f.start(1, nil)
		time.Sleep(35 * time.Minute)
		if all, _ := f.runsOf(key); all != paused+1 {
			t.Fatalf("the new owner ran the paused key %d times in 35 minutes; want none", all-paused-1)
		}
		missed := f.record(key).Missed

		f.request(store.RequestResume, key)
		time.Sleep(time.Second)
		if rec := f.record(key); rec.Paused {
			t.Fatalf("record after a request to resume: %+v; want not paused", rec)
		}
		time.Sleep(11 * time.Minute)
		if all, _ := f.runsOf(key); all != paused+2 {
			t.Fatalf("in 11 minutes after a resume, every 10: %d runs; want 1", all-paused-1)
		}
		if rec := f.record(key); rec.Missed != missed {
			t.Fatalf("after a resume the record counts %d missed slots, %d before; want the slots skipped while paused not counted", rec.Missed, missed)
		}

		// A request for a key nobody runs is dropped: nothing happens.
		f.request(store.RequestRun, "no-such-key")
		time.Sleep(time.Second)
		if len(f.overlaps) > 0 {
			t.Fatalf("overlapping runs: %v", f.overlaps)
		}
		f.leaveAll()
	})
}
