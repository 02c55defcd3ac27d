package main

import (
	"encoding/json"
	"errors"
	"io/fs"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/herdhq/herd/jobs"
)

// The flags' defaults: --every is spread, --cron runs at the times it
// names; --spread is for --cron and --no-spread for --every.
func TestJobsSpreadDefaults(t *testing.T) {
	for _, c := range []struct {
		args             []string
		spread, noSpread bool
	}{
		{[]string{"--every", "1h"}, false, false},
		{[]string{"--every", "1h", "--no-spread"}, false, true},
		{[]string{"--cron", "0 6 * * *"}, false, false},
		{[]string{"--cron", "0 6 * * *", "--spread"}, true, false},
	} {
		o := &jobsOpts{}
		cmd := jobsCmdFor(o)
		if err := cmd.ParseFlags(append(c.args, "--group", "g", "--", "true")); err != nil {
			t.Fatal(err)
		}
		o.args = cmd.Flags().Args()
		if _, _, err := o.validate(); err != nil {
			t.Fatalf("%q: %v", c.args, err)
		}
		cfg := o.config(nil, nil, nil, nil)
		if cfg.Spread != c.spread || cfg.NoSpread != c.noSpread || cfg.ClockSkew != jobs.DefaultClockSkew {
			t.Errorf("%q: Spread %v, NoSpread %v, ClockSkew %v; want %v, %v, %v", c.args, cfg.Spread, cfg.NoSpread, cfg.ClockSkew,
				c.spread, c.noSpread, jobs.DefaultClockSkew)
		}
	}
	j := func(extra ...string) []string {
		return append([]string{"jobs", "--store", "mem://", "--group", "g"}, extra...)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{j("--every", "1h", "--spread", "--", "true"), "--spread is for --cron"},
		{j("--cron", "0 6 * * *", "--no-spread", "--", "true"), "--no-spread is for --every"},
		{j("--every", "1h", "--clock-skew", "0s", "--", "true"), "--clock-skew must be between 1s and 24h0m0s (got 0s)"},
	} {
		if out, err := execute(t, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("herd %q: error %v; want one containing %q (output %q)", tc.args, err, tc.want, out)
		}
	}
}

var wholeSecondUTC = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`)

// A slot reads the same in {slot}, HERD_SLOT and herd status --json, with
// no fraction of a second; a key that never ran shows its next due time.
func TestJobsSlotAgreesWithStatus(t *testing.T) {
	dir := t.TempDir()
	run := startHerdIn(t, "run", dir, nil, "jobs", "--group", "often", "--keys", "a", "--every", "2s",
		"--", "sh", "-c", `echo "slot=$HERD_SLOT arg={slot}"`)
	daily := startHerdIn(t, "daily", dir, nil, "jobs", "--group", "daily", "--keys", "b", "--cron", "0 6 * * *",
		"--", "true")
	printed := func() map[string]bool {
		seen := map[string]bool{}
		for line := range strings.Lines(run.out.String()) {
			if _, rest, ok := strings.Cut(line, "[a] slot="); ok {
				f := strings.Fields(rest)
				if len(f) != 2 || "arg="+f[0] != f[1] || !wholeSecondUTC.MatchString(f[0]) {
					t.Fatalf("HERD_SLOT and {slot}: %q; want the same RFC 3339 UTC time in whole seconds", line)
				}
				seen[f[0]] = true
			}
		}
		return seen
	}
	status := func(group string) jobStatus {
		out, err := execute(t, "status", "--store", "sqlite://"+filepath.Join(dir, "herd.db"), "--group", group, "--jobs", "--json")
		if errors.Is(err, fs.ErrNotExist) || exitCode(err) == exitNotFound {
			return jobStatus{} // the members have not created the file or the group yet
		}
		if err != nil {
			t.Fatalf("status: %v\n%s", err, out)
		}
		var st struct {
			Groups []groupStatus `json:"groups"`
		}
		if err := json.Unmarshal([]byte(out), &st); err != nil || len(st.Groups) != 1 {
			t.Fatalf("status --json: %v\n%s", err, out)
		}
		if len(st.Groups[0].Jobs) != 1 {
			return jobStatus{} // the member has not stored its key yet
		}
		return st.Groups[0].Jobs[0]
	}
	eventually(t, 30*time.Second, "a slot in status that the run printed", func() bool {
		j := status("often")
		return j.Slot != nil && !j.Running && printed()[*j.Slot]
	})
	eventually(t, 30*time.Second, "the daily key's next due time before its first run", func() bool {
		j := status("daily")
		return j.NextDue != nil
	})
	j := status("daily")
	now := time.Now().UTC()
	want := time.Date(now.Year(), now.Month(), now.Day(), 6, 0, 0, 0, time.UTC)
	if !want.After(now) {
		want = want.AddDate(0, 0, 1)
	}
	if *j.NextDue != want.Format(time.RFC3339) || j.Slot != nil || j.Runs != 0 {
		t.Errorf("daily key before its first run: next due %v, slot %v, runs %d; want next due %v (06:00 as named, not spread)",
			ptrVal(j.NextDue), j.Slot, j.Runs, want.Format(time.RFC3339))
	}
	for _, m := range []*member{run, daily} {
		if err := m.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := m.wait(t, 30*time.Second); err != nil {
			t.Errorf("herd jobs: %v; want a clean exit", err)
		}
	}
}
