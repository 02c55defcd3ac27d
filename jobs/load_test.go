package jobs_test

import (
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/herdhq/herd/jobs"
)

// A run that reports its load (2 CPU seconds once a minute: 2 / Period)
// has it published as its key's load; a key whose runs report nothing
// publishes nothing, though each run checkpoints its record twice (the
// rate of checkpoints is no job's load).
func TestJobsPublishReportedLoads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, t.Context(), jobs.Config{Every: time.Minute, LoadReportInterval: 10 * time.Second})
		f.runFor = func(key string, r jobs.Run) time.Duration {
			if r.Period != time.Minute {
				t.Errorf("run of %s: Period %v, want 1m", key, r.Period)
			}
			if key == "hot" {
				r.ReportLoad(2 / r.Period.Seconds())
			}
			return time.Second
		}
		f.start(1, []string{"hot", "quiet"})
		time.Sleep(3 * time.Minute)
		snap, err := f.st.Snapshot(t.Context(), f.group)
		if err != nil {
			t.Fatal(err)
		}
		f.leaveAll()
		if l, ok := snap.LoadOf("hot"); !ok || math.Abs(l-0.0333) > 0.001 {
			t.Errorf("hot's published load %v (published: %v), want 0.0333", l, ok)
		}
		if l, ok := snap.LoadOf("quiet"); ok {
			t.Errorf("quiet, whose runs report no load, has the load %v published", l)
		}
		if runs := len(f.events()); runs < 4 {
			t.Errorf("%d runs in 3 minutes, want at least 4", runs)
		}
	})
}
