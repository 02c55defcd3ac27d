package main

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/memstore"
)

// statusCheck runs herd status --check --json on conn's store.
func statusCheck(t *testing.T, conn *connector, group string, grace time.Duration) (statusReport, error) {
	t.Helper()
	var out bytes.Buffer
	err := runStatus(t.Context(), &out, statusOpts{conn: conn, group: group, json: true, interval: 100 * time.Millisecond,
		timeout: 5 * time.Second, color: "never", limit: 50, check: true, grace: grace})
	var rep statusReport
	if out.Len() > 0 {
		rep = readJSON(t, func(b *bytes.Buffer) error { b.Write(out.Bytes()); return nil })
	}
	return rep, err
}

// --check passes once every partition runs, fails with exitUnhealthy,
// naming the partitions, when some stay not running for the grace, and
// passes when they start running within it (a crash's partitions wait for
// the session's TTL).
func TestStatusCheck(t *testing.T) {
	ms := memstore.New()
	conn := &connector{scheme: "mem", mem: ms}
	if _, err := ms.SetPartitions(t.Context(), "g", store.PartitionSet{Partitions: herd.Numbered(4)}); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	_, err := statusCheck(t, conn, "g", 300*time.Millisecond)
	if exitCode(err) != exitUnhealthy || !strings.Contains(err.Error(), "4 of 4 partitions not running (0: unowned, 1: unowned") {
		t.Fatalf("--check of a group nobody runs: %v (exit %d); want exit %d naming the partitions", err, exitCode(err), exitUnhealthy)
	}
	if took := time.Since(began); took < 300*time.Millisecond {
		t.Errorf("--check failed after %v; want after the grace, 300ms", took)
	}
	if _, err := statusCheck(t, conn, "nothing-stored", 100*time.Millisecond); exitCode(err) != exitNotFound {
		t.Errorf("--check of a group the store does not have: %v (exit %d); want exit %d (not found)", err, exitCode(err), exitNotFound)
	}

	// Members join while the check waits: it passes within the grace.
	done := make(chan error, 1)
	go func() { _, err := statusCheck(t, conn, "g", time.Minute); done <- err }()
	startFleet(t, sharedStore{ms}, "g", 2, nil)
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("--check while members take the partitions: %v; want it to pass", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("--check did not pass within 30s of the members joining")
	}
	rep, err := statusCheck(t, conn, "g", time.Millisecond)
	if err != nil || rep.Groups[0].Counts.Running != 4 {
		t.Errorf("--check with every partition running: %v, %+v; want it to pass and show the report", err, rep.Groups)
	}
}

// --check --jobs: a key whose next run is overdue by more than the grace,
// with no run under way, is unhealthy; the grace defaults to the longer of
// herd's default TTL and the TTL left on live sessions.
func TestStatusCheckOverdueKeys(t *testing.T) {
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	due := func(d time.Duration) *string { return ptr(now.Add(d).Format(time.RFC3339)) }
	g := groupStatus{Group: "j", PartitionSetStored: true, Counts: statusCounts{Partitions: 3, Running: 3}, Jobs: []jobStatus{
		{Key: "ok", NextDue: due(time.Minute)},
		{Key: "late", NextDue: due(-time.Minute)},
		{Key: "just", NextDue: due(-5 * time.Second)},
	}}
	bad := unhealthy(&statusReport{Groups: []groupStatus{g}}, now, 10*time.Second)
	if len(bad) != 1 || !strings.Contains(bad[0], "1 keys overdue by more than 10s: late") {
		t.Errorf("unhealthy: %q; want key late overdue only", bad)
	}
	if got := unhealthy(&statusReport{}, now, time.Second); len(got) != 1 {
		t.Errorf("a store without groups: %q; want unhealthy", got)
	}
	rep := &statusReport{Groups: []groupStatus{{Members: []memberStatus{{TTLLeftMS: 29_000}}}}}
	if got := checkGrace(0, rep); got != 29*time.Second {
		t.Errorf("grace from a session with 29s left: %v; want 29s", got)
	}
	if got := checkGrace(0, &statusReport{}); got != herd.DefaultSessionTTL {
		t.Errorf("grace without sessions: %v; want %v", got, herd.DefaultSessionTTL)
	}
}

// The built binary: herd status --check exits 7 when the group's partitions
// are not running, 0 once a member runs them.
func TestStatusCheckExitStatus(t *testing.T) {
	dir := t.TempDir()
	u := "sqlite://" + filepath.Join(dir, "herd.db")
	if code, stderr := runHerd(t, nil, "partitions", "set", "--store", u, "--group", "g", "0-1"); code != 0 {
		t.Fatalf("partitions set: exit %d\n%s", code, stderr)
	}
	code, stderr := runHerd(t, nil, "status", "--store", u, "--group", "g", "--check", "--grace", "200ms")
	if code != exitUnhealthy || !strings.Contains(stderr, "2 of 2 partitions not running") {
		t.Errorf("status --check of a group nobody runs: exit %d; want %d\n%s", code, exitUnhealthy, stderr)
	}
	startRunIn(t, "m", dir, nil, "--store", u, "--group", "g", "--", "sleep", "600")
	if code, stderr := runHerd(t, nil, "status", "--store", u, "--group", "g", "--check", "--grace", "30s"); code != 0 {
		t.Errorf("status --check with a member running every partition: exit %d; want 0\n%s", code, stderr)
	}
	if code, _ := runHerd(t, nil, "status", "--store", u, "--group", "g", "--check", "--watch"); code != exitUsage {
		t.Errorf("--check with --watch: exit %d; want %d", code, exitUsage)
	}
	var err error = withExit(exitUnhealthy, errors.New("x"))
	if exitCode(err) != 7 {
		t.Errorf("exitUnhealthy is %d; the documented value is 7", exitCode(err))
	}
}
