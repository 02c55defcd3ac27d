package jobs

import (
	"testing"
	"time"
)

// A daily cron in a zone with daylight saving time runs once a day on the
// days the clocks change: the repeated hour is collapsed in autumn, and a
// time in the skipped hour runs at the change in spring (as Vixie cron
// does). Jobs with a wildcard minute or hour follow real time, as there.
func TestCronDST(t *testing.T) {
	utc := func(mo time.Month, d, h, mi int) time.Time { return time.Date(2025, mo, d, h, mi, 0, 0, time.UTC) }
	for _, c := range []struct {
		expr string
		from time.Time
		want []time.Time
	}{
		// New York, back on 2025-11-02 at 02:00 EDT (06:00Z) to 01:00 EST.
		{"CRON_TZ=America/New_York 30 1 * * *", utc(11, 1, 0, 0),
			[]time.Time{utc(11, 1, 5, 30), utc(11, 2, 5, 30), utc(11, 3, 6, 30)}},
		// Paris, back on 2025-10-26 at 03:00 CEST (01:00Z) to 02:00 CET.
		{"CRON_TZ=Europe/Paris 30 2 * * *", utc(10, 25, 0, 0),
			[]time.Time{utc(10, 25, 0, 30), utc(10, 26, 0, 30), utc(10, 27, 1, 30)}},
		// New York, forward on 2025-03-09 at 02:00 EST (07:00Z) to 03:00 EDT:
		// 02:30 does not exist that day; the run is at the change.
		{"CRON_TZ=America/New_York 30 2 * * *", utc(3, 8, 0, 0),
			[]time.Time{utc(3, 8, 7, 30), utc(3, 9, 7, 0), utc(3, 10, 6, 30)}},
		// Paris, forward on 2025-03-30 at 02:00 CET (01:00Z) to 03:00 CEST.
		{"CRON_TZ=Europe/Paris 30 2 * * *", utc(3, 29, 0, 0),
			[]time.Time{utc(3, 29, 1, 30), utc(3, 30, 1, 0), utc(3, 31, 0, 30)}},
		// Outside the changes' hours: unchanged.
		{"CRON_TZ=Europe/Paris 0 6 * * *", utc(3, 29, 0, 0),
			[]time.Time{utc(3, 29, 5, 0), utc(3, 30, 4, 0), utc(3, 31, 4, 0)}},
		// A wildcard hour follows real time: every half hour, the repeated
		// hour included, none in the skipped one.
		{"CRON_TZ=America/New_York 30 * * * *", utc(11, 2, 4, 0),
			[]time.Time{utc(11, 2, 4, 30), utc(11, 2, 5, 30), utc(11, 2, 6, 30), utc(11, 2, 7, 30)}},
		{"CRON_TZ=America/New_York 30 * * * *", utc(3, 9, 5, 0),
			[]time.Time{utc(3, 9, 5, 30), utc(3, 9, 6, 30), utc(3, 9, 7, 30), utc(3, 9, 8, 30)}},
	} {
		s, err := ParseCron(c.expr)
		if err != nil {
			t.Skipf("no time zone data: %v", err)
		}
		sl := newSlots(s, "k", false)
		at := c.from
		for i, w := range c.want {
			at = sl.next(at)
			if !at.Equal(w) {
				t.Errorf("%s: slot %d after %v is %v; want %v", c.expr, i+1, c.from, at.UTC(), w)
				break
			}
		}
		// The member's other views of the schedule agree.
		last := c.want[len(c.want)-1]
		if got := sl.latest(last.Add(time.Minute)); !got.Equal(last) {
			t.Errorf("%s: latest slot at %v is %v; want %v", c.expr, last.Add(time.Minute), got.UTC(), last)
		}
		if n := sl.count(c.want[0], last); n != uint64(len(c.want)-1) {
			t.Errorf("%s: %d slots in [%v, %v); want %d", c.expr, n, c.want[0], last, len(c.want)-1)
		}
	}
}
