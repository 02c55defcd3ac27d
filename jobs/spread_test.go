package jobs_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/herdhq/herd/jobs"
)

// A cron expression runs at the times it names unless Spread is set; an
// interval is spread by default. Every slot is a whole second.
func TestCronRunsAtItsTimes(t *testing.T) {
	for _, c := range []struct {
		name    string
		cfg     jobs.Config
		aligned bool // every slot on the schedule's times
	}{
		{"cron", jobs.Config{Cron: "*/10 * * * *"}, true},
		{"cron with Spread", jobs.Config{Cron: "*/10 * * * *", Spread: true}, false},
		{"every", jobs.Config{Every: 10 * time.Minute}, false},
		{"every with NoSpread", jobs.Config{Every: 10 * time.Minute, NoSpread: true}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFleet(t, t.Context(), c.cfg)
				f.start(1, keys("k", 20))
				time.Sleep(time.Hour)
				f.leaveAll()
				offAligned := 0
				evs := f.events()
				for _, e := range evs {
					if !e.run.Slot.Equal(e.run.Slot.Truncate(time.Second)) {
						t.Errorf("slot %v of %s is not a whole second", e.run.Slot, e.run.Key)
					}
					if !e.run.Slot.Equal(e.run.Slot.Truncate(10 * time.Minute)) {
						offAligned++
					}
				}
				if len(evs) < 100 {
					t.Fatalf("%d runs in an hour; want about 120", len(evs))
				}
				if c.aligned && offAligned > 0 {
					t.Errorf("%d of %d runs not at the schedule's times", offAligned, len(evs))
				}
				if !c.aligned && offAligned < len(evs)/2 {
					t.Errorf("only %d of %d runs spread over the period", offAligned, len(evs))
				}
			})
		})
	}
}

// Before its first run, a key's record says when it is due, so the
// blackboard shows it.
func TestNextDueBeforeFirstRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		f := newFleet(t, ctx, jobs.Config{Cron: "0 6 * * *"})
		ks := keys("k", 3)
		f.start(1, ks)
		time.Sleep(time.Minute)
		bb, err := jobs.Blackboard(ctx, f.st, f.group)
		if err != nil {
			t.Fatal(err)
		}
		want := time.Date(2000, 1, 1, 6, 0, 0, 0, time.UTC)
		for _, k := range bb {
			if k.Record == nil || !k.Record.NextDue.Equal(want) || !k.Record.Slot.IsZero() || k.Record.Runs != 0 {
				t.Errorf("key %s before its first run: record %+v; want next due %v, never run", k.Key, k.Record, want)
			}
		}
		if n := len(f.events()); n != 0 {
			t.Errorf("%d runs before 06:00", n)
		}
		f.leaveAll()
	})
}
