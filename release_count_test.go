package herd

import "testing"

// The releaser counts a handed-off slot in once (expect) and out once
// (arrived), however often arrived is called, and never counts a slot
// expected after it arrived: a count left over would hold every later
// batch of releases back for releaseGather.
func TestReleaserCountsEachSlotOnce(t *testing.T) {
	r := &releaser{wake: make(chan struct{}, 1)}
	coming := func(want int64) {
		t.Helper()
		if n := r.coming.Load(); n != want {
			t.Fatalf("coming = %d, want %d", n, want)
		}
	}
	var handed, lost, held slot
	r.expect(&handed)
	r.expect(&handed)
	coming(1)
	r.arrived(&handed) // its release queued
	r.arrived(&handed) // its goroutine done
	coming(0)

	r.arrived(&lost) // returned without a handoff (lost, given back)
	r.expect(&lost)
	coming(0)

	done := r.hold()
	r.expect(&held)
	r.arrived(&held)
	coming(1)
	done()
	coming(0)
}
