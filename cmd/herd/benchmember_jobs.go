package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/herdhq/herd/jobs"
)

// A bench member of the jobs scenario (herd __bench-member --jobs-every):
// a jobs scheduler whose runs do nothing. Besides the store counts (with
// its checkpoint writes and how many keys it owns) it reports every run it
// started: its key, attempt, and how late it started.

// jobRun is one run a jobs member started.
type jobRun struct {
	Key     string `json:"key"`
	Attempt int    `json:"attempt"`
	At      int64  `json:"at"`   // Unix ns when it started
	LateUS  int64  `json:"late"` // microseconds after its slot's due time
}

// runLog collects a member's runs until they are reported.
type runLog struct {
	mu   sync.Mutex
	runs []jobRun
}

func (l *runLog) run(_ context.Context, r jobs.Run) error {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.runs = append(l.runs, jobRun{Key: r.Key, Attempt: r.Attempt, At: now.UnixNano(), LateUS: now.Sub(r.Slot).Microseconds()})
	return nil
}

func (l *runLog) take() []jobRun {
	l.mu.Lock()
	defer l.mu.Unlock()
	rs := l.runs
	l.runs = nil
	return rs
}

func runBenchJobsMember(ctx context.Context, r *reporter, storeURL, group, id string, ttl, every time.Duration, keys int, leaveIn time.Duration) error {
	fail := r.fail
	closeStore, err := r.openStore(ctx, storeURL)
	if err != nil {
		return err
	}
	defer closeStore()
	log := &runLog{}
	cfg := jobs.Config{Store: r.st, Group: group, Member: id, Every: every, Run: log.run, SessionTTL: ttl,
		Logger: slog.New(slog.DiscardHandler)}
	for i := range keys {
		cfg.Keys = append(cfg.Keys, fmt.Sprintf("key-%d", i))
	}
	mctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopJoin := context.AfterFunc(ctx, cancel)
	s, err := jobs.Start(mctx, cfg)
	if !stopJoin() || err != nil {
		if ctx.Err() != nil {
			return nil // told to stop before it joined: nothing to leave
		}
		return fail(err)
	}
	r.send(memberReport{Event: "joined"})
	tick := time.NewTicker(countsEvery)
	defer tick.Stop()
	report := func(event string, force bool) {
		r.st.owned.Store(int64(len(s.Member().Owned())))
		if rs := log.take(); len(rs) > 0 {
			r.send(memberReport{Event: "runs", Runs: rs})
		}
		r.counts(force, event)
	}
	for ctx.Err() == nil {
		select {
		case <-tick.C:
			report("counts", false)
		case <-s.Done():
			return fail(fmt.Errorf("member stopped: %w", s.Err()))
		case <-ctx.Done():
		}
	}
	lctx, lcancel := context.WithTimeout(context.Background(), leaveIn)
	defer lcancel()
	lerr := s.Leave(lctx)
	cancel()
	<-s.Done()
	report("exit", true)
	return lerr
}
