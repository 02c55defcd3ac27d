package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/herdhq/herd/jobs"
	"github.com/herdhq/herd/store"
)

// The blackboard of a jobs group, as `herd status --jobs` reads it. The JSON
// fields are documented with the rest of the schema in statusread.go.

type jobStatus struct {
	Key   string  `json:"key"`
	Owner *string `json:"owner"`
	Epoch *uint64 `json:"epoch"`
	// Load is the latest load published for the key (its run's CPU
	// time per second: herd jobs), absent if none.
	Load        *float64 `json:"load,omitempty"`
	RecordError *string  `json:"record_error"`
	RecordOwner *string  `json:"record_owner"`
	RecordEpoch *uint64  `json:"record_epoch"`
	RecordAgeMS *int64   `json:"record_age_ms"`
	Running     bool     `json:"running"`
	Slot        *string  `json:"slot"`
	Attempt     int      `json:"attempt"`
	LastStart   *string  `json:"last_start"`
	LastStop    *string  `json:"last_stop"`
	Result      *string  `json:"result"`
	Error       *string  `json:"error"`
	NextDue     *string  `json:"next_due"`
	Retry       bool     `json:"retry"`
	Runs        uint64   `json:"runs"`
	Failures    uint64   `json:"failures"`
	Takeovers   uint64   `json:"takeovers"`
	Missed      uint64   `json:"missed"`
}

type jobsCounts struct {
	Keys       int `json:"keys"`
	Running    int `json:"running"`
	Failed     int `json:"failed"`
	Unowned    int `json:"unowned"`
	Unreadable int `json:"unreadable"`
	NeverRun   int `json:"never_run"`
}

// listedAttention is jobs_listed when only the keys that need a look are
// listed (the counterpart of listedNotRunning).
const listedAttention = "attention"

// maxJobErrorText bounds a record's error text in the JSON (records are
// written by other programs; herd's own keep 4 KiB at most).
const maxJobErrorText = 4 << 10

// addJobs reads group's blackboard into gs: every key counted, at most
// q.limit listed unless q.all or the group has no more keys (else only the
// keys that need a look), each with its published load in snap. An error
// is the group's.
func addJobs(ctx context.Context, st store.Store, gs *groupStatus, q statusQuery, snap *store.Snapshot) {
	gs.Jobs, gs.JobsCounts = []jobStatus{}, &jobsCounts{}
	bb, err := jobs.Blackboard(ctx, st, gs.Group)
	if err != nil {
		if gs.Error == nil {
			msg := err.Error()
			gs.Error = &msg
		}
		return
	}
	all := make([]jobStatus, len(bb))
	for i, k := range bb {
		all[i] = jobOf(k)
		if l, ok := snap.LoadOf(k.Key); ok {
			all[i].Load = &l
		}
	}
	slices.SortFunc(all, func(a, b jobStatus) int { return compareIDs(a.Key, b.Key) })
	c := gs.JobsCounts
	for _, j := range all {
		c.Keys++
		switch {
		case j.RecordError != nil:
			c.Unreadable++
		case j.RecordEpoch == nil || j.Slot == nil && !j.Running:
			// No record, or only the next due time its owner wrote
			// before the first run.
			c.NeverRun++
		}
		if j.runningNow() {
			c.Running++
		}
		if ptrVal(j.Result) == jobs.ResultError {
			c.Failed++
		}
		if j.Owner == nil {
			c.Unowned++
		}
	}
	listed := listedAll
	if q.all || len(all) <= q.limit {
		gs.Jobs = all
	} else {
		listed = listedAttention
		for _, j := range all {
			if j.needsLook() && len(gs.Jobs) < q.limit {
				gs.Jobs = append(gs.Jobs, j)
			}
		}
	}
	gs.JobsListed, gs.JobsNotListed = &listed, ptr(len(all)-len(gs.Jobs))
}

// jobOf is one key's line of the blackboard.
func jobOf(k jobs.KeyStatus) jobStatus {
	j := jobStatus{Key: k.Key}
	if k.Owner != "" {
		j.Owner, j.Epoch = ptr(k.Owner), ptr(k.Epoch)
	}
	if k.Age > 0 {
		j.RecordAgeMS = ptr(k.Age.Milliseconds())
	}
	if k.Err != nil {
		j.RecordError = ptr(k.Err.Error())
		return j
	}
	r := k.Record
	if r == nil {
		j.RecordAgeMS = nil
		return j
	}
	j.RecordOwner, j.RecordEpoch = ptr(r.Owner), ptr(r.Epoch)
	j.Running, j.Attempt, j.Retry = r.Running, r.Attempt, r.Retry
	j.LastStart, j.LastStop, j.NextDue = utcSeconds(r.LastStart), utcSeconds(r.LastStop), utcSeconds(r.NextDue)
	if !r.Slot.IsZero() {
		j.Slot = ptr(slotText(r.Slot)) // as the run got it in {slot} and HERD_SLOT
	}
	if r.Result != "" {
		j.Result = ptr(r.Result)
	}
	if r.Error != "" {
		e := r.Error
		if len(e) > maxJobErrorText {
			e = strings.ToValidUTF8(e[:maxJobErrorText], "") + "...(cut)"
		}
		j.Error = &e
	}
	j.Runs, j.Failures, j.Takeovers, j.Missed = r.Runs, r.Failures, r.Takeovers, r.Missed
	return j
}

// runningNow: the record says running, written by the key's current owner
// under its current epoch.
func (j jobStatus) runningNow() bool {
	return j.Running && j.Owner != nil && j.RecordEpoch != nil && *j.RecordEpoch == *j.Epoch
}

// stoppedMidRun: the record says running, but its writer no longer holds
// the key (it crashed or lost it): the key's owner runs the slot again.
func (j jobStatus) stoppedMidRun() bool { return j.Running && !j.runningNow() }

// needsLook: a key listed when not every key is.
func (j jobStatus) needsLook() bool {
	r := ptrVal(j.Result)
	return j.RecordError != nil || j.Owner == nil || j.stoppedMidRun() ||
		!j.Running && (r == jobs.ResultError || r == jobs.ResultInterrupted)
}

// utcSeconds is t in RFC 3339, UTC, to the second; nil for the zero time.
func utcSeconds(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	return ptr(t.UTC().Truncate(time.Second).Format(time.RFC3339))
}

// writeJobsGroup writes a group's blackboard: its header, its members and
// one line per listed key, times relative to now.
func writeJobsGroup(b *strings.Builder, g groupStatus, ts textStyle, now time.Time) {
	c := ptrVal(g.JobsCounts)
	fmt.Fprintf(b, "group %s: %s, %s", g.Group, plural(c.Keys, "key"), ts.paint(ansiGreen, fmt.Sprintf("%d running", c.Running)))
	for _, x := range []struct {
		n          int
		what, colr string
	}{{c.Failed, "failed", ansiRed}, {c.Unowned, "unowned", ansiRed}, {c.Unreadable, "unreadable", ansiMagenta}, {c.NeverRun, "never run", ansiPlain}} {
		if x.n > 0 {
			b.WriteString(", " + ts.paint(x.colr, fmt.Sprintf("%d %s", x.n, x.what)))
		}
	}
	fmt.Fprintf(b, "; %s\n", plural(len(g.Members), "member"))
	if !g.PartitionSetStored {
		b.WriteString("no keys are stored: herd jobs --keys (or jobs.Config.Keys) sets them\n")
	}
	if g.Error != nil {
		fmt.Fprintf(b, "error: %s\n", *g.Error)
	}
	writeMembers(b, g, "KEYS")
	if len(g.Jobs) > 0 {
		b.WriteString("\n")
		t := newTable()
		loadCol := ""
		if g.loads {
			loadCol = "LOAD\t"
		}
		fmt.Fprintf(t.tw, "KEY\tOWNER\t%s%s\tLAST START\tLAST STOP\t%s\tNEXT DUE\tMISSED\tRUNS\n", loadCol, ts.paint(ansiPlain, "RUNNING"), ts.paint(ansiPlain, "RESULT"))
		for _, j := range g.Jobs {
			owner := ptrVal(j.Owner)
			if owner == "" {
				owner = "-"
			}
			if g.loads {
				owner += "\t" + fmtLoad(j.Load)
			}
			if j.RecordError != nil {
				fmt.Fprintf(t.tw, "%s\t%s\t%s\t-\t-\t%s\t-\t-\t-\n", j.Key, owner, ts.paint(ansiPlain, "-"), ts.paint(ansiMagenta, "unreadable record"))
				continue
			}
			running, runColour := "no", ansiPlain
			switch {
			case j.runningNow():
				running, runColour = "yes", ansiGreen
				if j.LastStart != nil {
					running = "yes, for " + strings.TrimSuffix(relTime(now, j.LastStart), " ago")
				}
			case j.stoppedMidRun():
				running, runColour = "stopped mid-run", ansiYellow
			}
			result, resColour := "-", ansiPlain
			switch r := ptrVal(j.Result); r {
			case "":
			case jobs.ResultOK:
				result, resColour = r, ansiGreen
			case jobs.ResultError:
				result, resColour = "error: "+capText(ptrVal(j.Error), 40), ansiRed
			default:
				result, resColour = r, ansiYellow
			}
			next := relTime(now, j.NextDue)
			if j.Retry && j.NextDue != nil {
				next += " (retry)"
			}
			fmt.Fprintf(t.tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\n", j.Key, owner, ts.paint(runColour, running),
				relTime(now, j.LastStart), relTime(now, j.LastStop), ts.paint(resColour, result), next, j.Missed, j.Runs)
		}
		t.writeTo(b)
	}
	if n := ptrVal(g.JobsNotListed); n > 0 {
		fmt.Fprintf(b, "(%d more %s not listed; --all lists every one)\n", n, map[bool]string{true: "key", false: "keys"}[n == 1])
	}
	var bad []jobStatus
	for _, j := range g.Jobs {
		if j.RecordError != nil {
			bad = append(bad, j)
		}
	}
	if len(bad) > 0 {
		b.WriteString("\nunreadable records (their keys start afresh at their next run):\n")
		for _, j := range bad {
			fmt.Fprintf(b, "  key %q: %s\n", j.Key, *j.RecordError)
		}
	}
	writeMalformed(b, g)
}

// relTime writes an RFC 3339 time relative to now: "3m05s ago", "in 12m",
// "now"; "-" for none.
func relTime(now time.Time, s *string) string {
	if s == nil {
		return "-"
	}
	t, err := time.Parse(time.RFC3339, *s)
	if err != nil {
		return *s
	}
	d := now.Sub(t)
	switch {
	case d > -time.Second && d < time.Second:
		return "now"
	case d > 0:
		return shortAge(d) + " ago"
	}
	return "in " + shortAge(-d)
}

// shortAge is fmtAge to the second.
func shortAge(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%ds", int(d.Seconds()))
	}
	return fmtAge(d)
}

// capText is the first line of s, cut to n characters.
func capText(s string, n int) string {
	s = strings.ReplaceAll(strings.TrimRight(s, "\r\n"), "\t", " ")
	cut := false
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s, cut = s[:i], true
	}
	if utf8.RuneCountInString(s) > n {
		s, cut = string([]rune(s)[:n]), true
	}
	if cut {
		s += "…"
	}
	return s
}
