package main

import (
	"log/slog"
	"sync"
	"time"

	"github.com/herdhq/herd/internal/child"
	"github.com/herdhq/herd/jobs"
)

// jobsLoad measures the load of each key a herd jobs member runs: the CPU
// time of its runs (the child's process group) per second of its
// schedule, c / Run.Period for a run that used c CPU seconds (2 s of CPU
// once a minute: 0.033), reported with Run.ReportLoad after each run. A
// run longer than a read of /proc reports its CPU so far as it goes, once
// that exceeds the key's last load, so a long run shows before it ends.
type jobsLoad struct {
	cpu   *child.CPU    // nil: loads are not measured (--load-interval 0)
	every time.Duration // how often a running child's CPU time is read
	log   *slog.Logger
	warn  sync.Once // a failure to read /proc is logged once
	mu    sync.Mutex
	last  map[string]float64 // key -> the load last reported for it
}

// init sets the meter up for loads published every loadEvery (0: none).
func (l *jobsLoad) init(loadEvery time.Duration, log *slog.Logger) {
	l.log, l.last = log, map[string]float64{}
	if loadEvery > 0 {
		l.every = min(cpuPeriod, max(loadEvery/2, time.Second))
		l.cpu = child.NewCPU(l.every / 2)
	}
}

// report reports load v for r's key if it is above the key's last load,
// or always if final (the run ended).
func (l *jobsLoad) report(r jobs.Run, v float64, final bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if final || v > l.last[r.Key] {
		l.last[r.Key] = v
		r.ReportLoad(v)
	}
}

// watch reads the CPU time of run r's child p every l.every while it
// runs, and reports it as its key's load once it exceeds the last; the
// function returned stops it.
func (l *jobsLoad) watch(r jobs.Run, p *child.Process) (stop func()) {
	if l.cpu == nil || r.Period <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(l.every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-p.Done():
				return
			case <-t.C:
			}
			used, err := l.cpu.Group(p.Pid())
			if err != nil {
				l.warn.Do(func() {
					l.log.Warn("cannot measure a running child's CPU time: a key's load is known when its run ends", "err", err)
				})
				continue
			}
			l.report(r, used.Seconds()/r.Period.Seconds(), false)
		}
	}()
	return func() { close(done) }
}

// ended reports the CPU time of run r's child p, which has exited, as its
// key's load.
func (l *jobsLoad) ended(r jobs.Run, p *child.Process) {
	if l.cpu == nil || r.Period <= 0 {
		return
	}
	l.report(r, p.CPU().Seconds()/r.Period.Seconds(), true)
}
