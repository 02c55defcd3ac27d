package jobs_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/herdhq/herd/jobs"
)

// The owner of a key crashes mid-run; by the time its session expires
// (TTL 3 minutes) later slots are due, so the successor runs the latest
// one instead of repeating the interrupted slot. The counters say so: no
// takeover (Run.Takeover false, record and metric unchanged), and only the
// slot that never started counts as missed; the interrupted slot had a run.
func TestSupersededTakeoverCounts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		reg := prometheus.NewRegistry()
		f := newFleet(t, ctx, jobs.Config{Every: time.Minute, NoSpread: true, SessionTTL: 3 * time.Minute, Metrics: reg})
		f.runFor = func(string, jobs.Run) time.Duration { return 30 * time.Second }
		f.start(1, []string{"k"})
		f.start(1, nil)
		time.Sleep(3*time.Minute + 10*time.Second) // the run of 00:03 is under way on m1
		if len(f.runningOn("m1")) != 1 {
			t.Fatal("m1 is not running k")
		}
		crashed := f.record("k")
		f.crash("m1")
		time.Sleep(4 * time.Minute)
		var first *runEvent
		for _, e := range f.events() {
			if e.member == "m2" {
				first = &e
				break
			}
		}
		if first == nil {
			t.Fatal("m2 did not run k")
		}
		r := first.run
		latest := first.start.Truncate(time.Minute)
		between := uint64(latest.Sub(crashed.Slot)/time.Minute) - 1
		if r.Takeover || !r.Slot.Equal(latest) || between < 1 || r.Missed != between {
			t.Errorf("m2's first run (at %v): slot %v, takeover %v, missed %d; want slot %v (the latest), no takeover, %d missed (the slots after the interrupted %v)",
				first.start, r.Slot, r.Takeover, r.Missed, latest, between, crashed.Slot)
		}
		takeovers, _ := value(t, reg, "herd_jobs_takeovers_total", "m2")
		missed, _ := value(t, reg, "herd_jobs_missed_slots_total", "m2")
		f.leaveAll()
		rec := f.record("k")
		if rec.Takeovers != 0 || rec.Missed != between {
			t.Errorf("record: %d takeovers, %d missed; want 0 and %d", rec.Takeovers, rec.Missed, between)
		}
		if takeovers != 0 || missed != float64(between) {
			t.Errorf("metrics: %v takeovers, %v missed slots; want 0 and %d", takeovers, missed, between)
		}
	})
}
