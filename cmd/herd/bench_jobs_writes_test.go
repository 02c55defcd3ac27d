package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/herdhq/herd/jobs"
)

// A run's record writes are counted for it whenever they are made: its
// "running" write before the window began and its outcome write after it
// ended included; writes of other runs, and of a key that never ran, are
// not.
func TestRunWritesAttributesWritesToTheirRun(t *testing.T) {
	w := newRunWrites()
	slot := time.Date(2026, 11, 28, 1, 0, 0, 0, time.UTC)
	rec := func(running bool, slot time.Time, attempt int) []byte {
		b, err := json.Marshal(jobs.Record{V: jobs.RecordVersion, Owner: "m1", Epoch: 7, Running: running, Slot: slot, Attempt: attempt})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	run := jobs.Run{Key: "a", Slot: slot, Attempt: 1, Epoch: 7}
	w.wrote("a", 7, rec(false, time.Time{}, 0))          // announced: no run
	w.wrote("a", 7, rec(true, slot, 1))                  // before the window
	w.wrote("a", 7, rec(true, slot, 1))                  // the same write again, after a failure
	w.wrote("b", 7, rec(true, slot, 1))                  // another key
	w.wrote("a", 8, rec(true, slot, 1))                  // another epoch
	w.wrote("a", 7, rec(true, slot.Add(time.Second), 1)) // another slot
	w.wrote("a", 7, rec(true, slot, 2))                  // another attempt
	done := make(chan int64)
	go func() { done <- w.of(t.Context(), []runID{idOf(run)}, time.Minute) }()
	w.wrote("a", 7, rec(false, slot, 1)) // the outcome, after the window
	if n := <-done; n != 3 {
		t.Errorf("writes of the run: %d; want 3 (two running, one outcome)", n)
	}
}
