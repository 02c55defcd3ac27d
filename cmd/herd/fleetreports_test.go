package main

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// The steady window starts once every live member has published its
// first load report, plus reportsSettle: the reports a placement causes are
// not counted as the fleet's cost at rest.
func TestFirstReportsWaitsForEveryLiveMember(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, gone := &memberProc{}, &memberProc{}, &memberProc{gone: true}
		f := &procFleet{all: []*memberProc{a, b, gone}}
		a.counts.LoadReports = 1
		start := time.Now()
		go func() {
			time.Sleep(30 * time.Second) // b reports at the next minute
			f.mu.Lock()
			b.counts.LoadReports = 1
			f.mu.Unlock()
		}()
		if err := f.firstReports(context.Background()); err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		if took < 30*time.Second+reportsSettle || took > 30*time.Second+reportsSettle+2*countsEvery {
			t.Fatalf("firstReports returned after %v, want about 30s + %v", took, reportsSettle)
		}
	})
}

// A member that never reports (nothing to publish) does not hold the
// window back for longer than two report intervals.
func TestFirstReportsGivesUpAfterTwoIntervals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &procFleet{all: []*memberProc{{}}}
		start := time.Now()
		if err := f.firstReports(context.Background()); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took > 2*time.Minute+reportsSettle+countsEvery {
			t.Fatalf("firstReports waited %v for a member that never reports", took)
		}
	})
}
