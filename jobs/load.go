package jobs

import "time"

// ReportLoad reports the key's load, v: for example the CPU seconds its
// runs use per second of schedule, c / Period for a run that used c CPU
// seconds (herd jobs reports that for its children: 2 s of CPU once a
// minute is 0.033). The value stays the key's load on this member, across
// its runs, until the next report; the member publishes it every
// Config.LoadReportInterval, smoothed as any load (docs/loads.md), and
// keys are balanced by load once the published loads differ. Every member
// of a group must report in the same unit. A value that is not a finite
// number >= 0 is ignored, and so is a report on a Run made outside a
// Scheduler.
func (r Run) ReportLoad(v float64) {
	if r.claim != nil {
		r.claim.ReportLoad(v)
	}
}

// period returns the length of the schedule's period that holds t, from
// its time at or before t to the next (0 if there is none).
func (sl slots) period(t time.Time) time.Duration {
	b := sl.baseAtOrBefore(t)
	if b.IsZero() {
		return 0
	}
	n := sl.s.Next(b)
	if n.IsZero() {
		return 0
	}
	return n.Sub(b)
}
