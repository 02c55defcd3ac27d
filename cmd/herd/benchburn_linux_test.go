package main

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

// A skewed handler receives the CPU it asks for even while it waits for a
// core: two handlers asking 100 ms each on one core burn 200 ms of the
// process's CPU between them (spun on the wall clock, they burnt about
// 100 ms: each counted the time the other ran).
func TestBurnReceivesWhatItAsks(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	before := processCPU()
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			clock, done := burnClock()
			defer done()
			spin(clock, 100*time.Millisecond)
		})
	}
	wg.Wait()
	if got := processCPU() - before; got < 190*time.Millisecond {
		t.Fatalf("two handlers asking 100 ms of CPU each burnt %v in all; want at least 190ms", got)
	}
}
