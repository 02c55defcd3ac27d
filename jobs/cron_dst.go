package jobs

import (
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// cronSchedule is a parsed cron expression with Vixie cron's rules for the
// changes of daylight saving time. github.com/robfig/cron/v3 alone gives
// a daily "30 1 * * *" in New York twice on the day the clocks go back
// (01:30 EDT and 01:30 EST) and not at all on the day they go forward when
// its time falls in the skipped hour ("30 2 * * *": 02:30 does not exist).
// A job at a fixed time (its minute and hour fields are not wildcards) runs
// once a day on both days:
//
//   - going back, the first of the two times a wall-clock time occurs is
//     its slot; the repeat is skipped;
//   - going forward, a time in the skipped hour runs at the change (03:00
//     local, the first instant after the gap), once.
//
// A job whose minute or hour field starts with "*" ("*/15 * * * *",
// "0 * * * *") follows real time, as in Vixie cron: it runs in both passes
// through a repeated hour, and none of its times is in a skipped one.
type cronSchedule struct {
	spec  *cron.SpecSchedule
	fixed bool // minute and hour are not wildcards: DST-adjusted
}

// maxDSTSteps bounds the repeats skipped in a row (one per change).
const maxDSTSteps = 64

// Next returns the first time of the schedule after t.
func (c cronSchedule) Next(t time.Time) time.Time {
	n := c.spec.Next(t)
	if !c.fixed {
		return n
	}
	from := t
	for range maxDSTSteps {
		if n.IsZero() {
			return n
		}
		if g := c.skippedBefore(from, n); !g.IsZero() {
			return g
		}
		if !c.repeats(n) {
			return n
		}
		from, n = n, c.spec.Next(n)
	}
	return n
}

// skippedBefore returns the first forward change of the clocks in (from, n)
// whose skipped wall-clock times include a time of the schedule, or zero.
func (c cronSchedule) skippedBefore(from, n time.Time) time.Time {
	loc := c.spec.Location
	at := from
	for range maxDSTSteps {
		_, end := at.In(loc).ZoneBounds()
		if end.IsZero() || !end.Before(n) {
			return time.Time{}
		}
		at = end
		_, before := end.Add(-time.Nanosecond).In(loc).Zone()
		_, after := end.In(loc).Zone()
		if after <= before || !end.After(from) {
			continue
		}
		// The wall times from end's wall time before the change, for
		// after-before seconds, do not exist: read them in the zone before.
		old := *c.spec
		old.Location = time.FixedZone("", before)
		if m := old.Next(end.Add(-time.Second)); !m.IsZero() && m.Before(end.Add(time.Duration(after-before)*time.Second)) {
			return end
		}
	}
	return time.Time{}
}

// repeats reports whether t's wall-clock time occurred earlier already, in
// the hour repeated after a backward change of the clocks.
func (c cronSchedule) repeats(t time.Time) bool {
	loc := c.spec.Location
	start, _ := t.In(loc).ZoneBounds()
	if start.IsZero() {
		return false
	}
	_, before := start.Add(-time.Nanosecond).In(loc).Zone()
	_, now := t.In(loc).Zone()
	return before > now && t.Before(start.Add(time.Duration(before-now)*time.Second))
}

// fixedTime reports whether a cron expression (without its CRON_TZ= prefix)
// names fixed times of day: its minute and hour fields do not start with
// "*" or "?", or it is a descriptor other than @hourly.
func fixedTime(expr string) bool {
	f := strings.Fields(expr)
	if len(f) == 0 {
		return false
	}
	if strings.HasPrefix(f[0], "@") {
		return f[0] != "@hourly"
	}
	if len(f) < 2 {
		return false
	}
	wild := func(s string) bool { return strings.HasPrefix(s, "*") || strings.HasPrefix(s, "?") }
	return !wild(f[0]) && !wild(f[1])
}
