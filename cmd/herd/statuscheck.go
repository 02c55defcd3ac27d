package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/herdhq/herd"
)

// herd status --check: a health check a script or a monitor can run. It
// passes (exit 0) as soon as a read shows every group it reads healthy, and
// fails (exitUnhealthy) when the group has stayed unhealthy for the whole
// grace, reading it again every --interval meanwhile:
//
//   - a group with a partition set: every partition of the set is running
//     (owned by a live session); no partition set stored is unhealthy;
//   - with --jobs, also: no key's next run is overdue by more than the
//     grace without a run under way (the members' clocks write next_due).
//
// Why a grace and repeated reads: a crash legitimately leaves the crashed
// member's partitions unowned until its session expires (its TTL), and a
// rebalance moves partitions through released; a single read would fail
// the check during every deploy. The store keeps no session TTL, so the
// grace is --grace, or without it the longer of herd's default TTL (10s,
// the default --ttl of herd run and herd jobs) and the longest time left
// on a live session's TTL at the first read (a session just renewed shows
// about its whole TTL).

// checkGrace is the grace of --check: grace if given (> 0), else estimated
// from the first report (see above).
func checkGrace(grace time.Duration, rep *statusReport) time.Duration {
	if grace > 0 {
		return grace
	}
	g := herd.DefaultSessionTTL
	for _, gs := range rep.Groups {
		for _, m := range gs.Members {
			g = max(g, time.Duration(m.TTLLeftMS)*time.Millisecond)
		}
	}
	return g
}

// unhealthy lists what is wrong in rep, as read at now: one line per
// group, nil if every group is healthy. grace is how late a key's run may
// be before it counts as overdue.
func unhealthy(rep *statusReport, now time.Time, grace time.Duration) []string {
	if len(rep.Groups) == 0 {
		return []string{"no group in the store"}
	}
	var out []string
	for _, g := range rep.Groups {
		var why []string
		switch {
		case g.Error != nil:
			why = append(why, "cannot be read: "+*g.Error)
		case !g.PartitionSetStored:
			why = append(why, "no partition set stored")
		case g.Counts.Running < g.Counts.Partitions:
			why = append(why, fmt.Sprintf("%d of %d partitions not running%s", g.Counts.Partitions-g.Counts.Running,
				g.Counts.Partitions, namesNotRunning(g)))
		}
		if late := overdueKeys(g, now, grace); len(late) > 0 {
			why = append(why, fmt.Sprintf("%d keys overdue by more than %v: %s", len(late), grace, capList(late)))
		}
		if len(why) > 0 {
			out = append(out, fmt.Sprintf("group %q: %s", g.Group, strings.Join(why, "; ")))
		}
	}
	return out
}

// namesNotRunning names the listed partitions of the set that are not
// running, with their state: " (3: unowned, 5: released)".
func namesNotRunning(g groupStatus) string {
	var ids []string
	for _, p := range g.Partitions {
		if p.InSet && p.State != stateRunning {
			ids = append(ids, p.Partition+": "+p.State)
		}
	}
	if len(ids) == 0 {
		return ""
	}
	return " (" + capList(ids) + ")"
}

// overdueKeys lists the keys of a jobs group (read with --jobs) whose next
// run was due more than grace before now and that no run is under way for.
func overdueKeys(g groupStatus, now time.Time, grace time.Duration) []string {
	var late []string
	for _, j := range g.Jobs {
		if j.NextDue == nil || j.runningNow() {
			continue
		}
		due, err := time.Parse(time.RFC3339, *j.NextDue)
		if err == nil && now.Sub(due) > grace {
			late = append(late, j.Key)
		}
	}
	return late
}

// capList joins the first ten of ids, and counts the rest.
func capList(ids []string) string {
	const most = 10
	if len(ids) <= most {
		return strings.Join(ids, ", ")
	}
	return strings.Join(ids[:most], ", ") + fmt.Sprintf(" and %d more", len(ids)-most)
}

// runCheck is herd status --check: read until healthy or the grace has
// passed, write the last report, and return nil or an error with
// exitUnhealthy naming what is wrong.
func runCheck(ctx context.Context, grace, interval time.Duration, read func() (*statusReport, error), write func(*statusReport) error) error {
	start := time.Now()
	for {
		rep, err := read()
		if err != nil {
			return err
		}
		g := checkGrace(grace, rep)
		bad := unhealthy(rep, time.Now(), g)
		if len(bad) == 0 || time.Since(start) >= g {
			if err := write(rep); err != nil {
				return err
			}
			if len(bad) == 0 {
				return nil
			}
			return withExit(exitUnhealthy, fmt.Errorf("unhealthy for %v (the grace): %s", g, strings.Join(bad, "; ")))
		}
		t := time.NewTimer(min(interval, g-time.Since(start)))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}
