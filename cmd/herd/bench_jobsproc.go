package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// jobsProcBench is the jobs scenario on member processes: the same figures
// as jobsBench, from the runs and counts the members report.
type jobsProcBench struct {
	f     *procFleet
	keys  int
	every time.Duration

	mu      sync.Mutex
	from    int64 // the measured window, Unix ns (0: not measuring)
	to      int64
	runs    int
	lates   []time.Duration
	keysRun map[string]bool
}

func (b *jobsProcBench) record(rs []jobRun) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, r := range rs {
		if b.from == 0 || r.At < b.from || (b.to != 0 && r.At >= b.to) {
			continue
		}
		b.runs++
		b.keysRun[r.Key] = true
		if r.Attempt == 1 {
			b.lates = append(b.lates, time.Duration(r.LateUS)*time.Microsecond)
		}
	}
}

func runJobsProcScenario(ctx context.Context, conn *connector, o benchOpts, n int, every time.Duration) (_ benchResult, err error) {
	f, err := newFleet(conn, fmt.Sprintf("bench-jobs-%d", time.Now().UnixNano()), n, benchScenario{}, o)
	if err != nil {
		return benchResult{}, err
	}
	pf := f.(*procFleet)
	b := &jobsProcBench{f: pf, keys: n, every: every, keysRun: map[string]bool{}}
	pf.onRuns = b.record
	pf.args = func(idx int) []string {
		a := []string{"--jobs-every", every.String()}
		if idx == 0 {
			a = append(a, "--jobs-keys", fmt.Sprint(n))
		}
		return a
	}
	defer func() { err = errors.Join(err, pf.close()) }()
	pf.touched = true
	began := time.Now()
	progressf(o, "jobs: %d member processes, %d keys every %v, on %s", jobsBenchMembers, n, every, conn.name())
	if _, err := pf.join(1); err != nil { // the first sets the keys
		return benchResult{}, err
	}
	if _, err := pf.join(jobsBenchMembers - 1); err != nil {
		return benchResult{}, err
	}
	if err := b.waitPlaced(ctx, o.ttl+60*time.Second+balanceAllowance(n)); err != nil {
		return benchResult{}, err
	}
	placed := time.Since(began)
	progressf(o, "jobs: placed in %.3fs; one interval to warm up, two measured", placed.Seconds())
	if err := sleepCtx(ctx, every); err != nil { // every key runs once: its record exists
		return benchResult{}, err
	}
	c0 := b.counts()
	b.mu.Lock()
	b.from = time.Now().UnixNano()
	b.mu.Unlock()
	if err := sleepCtx(ctx, 2*every); err != nil {
		return benchResult{}, err
	}
	b.mu.Lock()
	b.to = time.Now().UnixNano()
	b.mu.Unlock()
	if err := sleepCtx(ctx, 2*countsEvery); err != nil { // the window's last reports
		return benchResult{}, err
	}
	c1 := b.counts()
	b.mu.Lock()
	runs, lates, keysRun := b.runs, slices.Clone(b.lates), len(b.keysRun)
	b.mu.Unlock()
	if runs == 0 || len(lates) == 0 {
		return benchResult{}, errors.New("no run in the measured window")
	}
	return jobsResult(conn, o, n, every, placed, runs, lates, keysRun, c1.ops()-c0.ops(), c1.Checkpoints-c0.Checkpoints, true), nil
}

func (b *jobsProcBench) counts() memberCounts {
	b.f.mu.Lock()
	defer b.f.mu.Unlock()
	var n memberCounts
	for _, m := range b.f.all {
		c := m.counts
		n.FullReads, n.RecordReads, n.LogReads = n.FullReads+c.FullReads, n.RecordReads+c.RecordReads, n.LogReads+c.LogReads
		n.Writes, n.Checkpoints = n.Writes+c.Writes, n.Checkpoints+c.Checkpoints
	}
	return n
}

// waitPlaced waits until the members report owning every key, spread fair.
func (b *jobsProcBench) waitPlaced(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		b.f.mu.Lock()
		live := b.f.liveLocked()
		lo, hi := b.keys/max(len(live), 1), (b.keys+len(live)-1)/max(len(live), 1)
		total, fair := int64(0), true
		for _, i := range live {
			n := b.f.all[i].counts.Owned
			total += n
			fair = fair && n >= int64(lo) && n <= int64(hi)
		}
		b.f.mu.Unlock()
		if total == int64(b.keys) && fair {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("keys not placed within %v: %d of %d owned", limit, total, b.keys)
		}
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
}
