package main

import (
	"context"
	"fmt"
	"runtime"
	"syscall"
	"time"
)

// steady lets the balanced in-process fleet run for settle, then measures
// window. CPU and heap are this whole process's, divided by the number of
// members (all of them run here).
func (c *cluster) steady(ctx context.Context, settle, window time.Duration) (steadyFigures, error) {
	if err := sleepCtx(ctx, settle); err != nil {
		return steadyFigures{}, err
	}
	n := len(c.live())
	ops0, cpu0, t0 := c.storeOps(), processCPU(), time.Now()
	reads0 := c.storeCounts().Reads
	c.tr.Reset()
	if err := sleepCtx(ctx, window); err != nil {
		return steadyFigures{}, err
	}
	secs := time.Since(t0).Seconds()
	f := steadyFigures{
		OpsPerSec:     float64(c.storeOps()-ops0) / float64(n) / secs,
		CPUPerSec:     (processCPU() - cpu0).Seconds() / float64(n) / secs,
		FullReads:     c.storeCounts().Reads - reads0,
		MaxConcurrent: c.tr.MaxConcurrent(),
	}
	if ok, why := c.tr.Balanced(c.parts, c.live()); !ok || c.tr.Moves() != 0 {
		return steadyFigures{}, fmt.Errorf("fleet did not stay balanced and still (%d moves): %s", c.tr.Moves(), why)
	}
	runtime.GC() // the heap in use, not the garbage not yet collected
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heap := ms.HeapInuse / uint64(n)
	f.HeapPerMember = &heap
	return f, nil
}

// processCPU is the user+system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
