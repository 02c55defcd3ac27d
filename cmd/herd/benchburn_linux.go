package main

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// burnClock returns a clock of the CPU time the calling goroutine's thread
// has used, the goroutine locked to that thread until done is called: a
// handler of the skewed scenario that spins until this clock has advanced
// by what it asks has received that CPU, however busy the machine (a spin
// timed on the wall clock receives less whenever the thread waits for a
// core). If the thread's clock cannot be read, the wall clock.
func burnClock() (clock func() time.Duration, done func()) {
	runtime.LockOSThread()
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		runtime.UnlockOSThread()
		return wallClock()
	}
	return func() time.Duration {
		if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
			return 0
		}
		return time.Duration(ts.Nano())
	}, runtime.UnlockOSThread
}
