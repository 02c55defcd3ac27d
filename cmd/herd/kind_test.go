package main

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/herdhq/herd/internal/blackhole"
	"github.com/herdhq/herd/store/sqlitestore"
)

// exitStatus is the exit status of a finished herd (0 for no error).
func exitStatus(t *testing.T, err error) int {
	t.Helper()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	t.Fatalf("herd did not exit normally: %v", err)
	return -1
}

// storedSet reads the number of partitions of group in the SQLite file.
func storedSet(t *testing.T, url, group string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := sqlitestore.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	snap, err := st.Snapshot(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	return len(snap.Partitions), snap.Kind
}

// Two fleets that picked one group name (issue: herd run members and a
// herd jobs member took each other over, silently): the second herd run,
// given another set, joins on the stored one and warns; herd jobs is
// refused with the "in use" status and says why; and the reverse.
func TestRunAndJobsSharingAGroupName(t *testing.T) {
	dir := t.TempDir()
	url := "sqlite://" + filepath.Join(dir, "h.db")
	a := startRun(t, "a", nil, "--store", url, "--group", "dup", "--partitions", "0-3", "--ttl", "2s", "--", "sleep", "600")
	eventually(t, 20*time.Second, "a joined", func() bool { return strings.Contains(a.out.String(), "joined") })
	b := startRun(t, "b", nil, "--store", url, "--group", "dup", "--partitions", "0-7", "--ttl", "2s", "--", "sleep", "600")
	eventually(t, 20*time.Second, "b joined", func() bool { return strings.Contains(b.out.String(), "joined") })
	if out := b.out.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "differs from the one the group holds") {
		t.Fatalf("b, given 0-7 in a group of 0-3, said:\n%s\nwant a WARN that it joins on the stored set", out)
	}
	if n, kind := storedSet(t, url, "dup"); n != 4 || kind != "partitions" {
		t.Fatalf("after b joined: %d partitions, kind %q; want the stored 4, kind partitions", n, kind)
	}
	j := startHerd(t, "jobs", nil, "jobs", "--store", url, "--group", "dup", "--every", "5s", "--keys", "x,y", "--", "true")
	if code := exitStatus(t, j.wait(t, 30*time.Second)); code != exitInUse || !strings.Contains(j.out.String(), "another kind") {
		t.Fatalf("herd jobs in a group of herd run: exit status %d, output:\n%s\nwant %d and a word on the group's kind", code, j.out.String(), exitInUse)
	}
	if n, kind := storedSet(t, url, "dup"); n != 4 || kind != "partitions" {
		t.Fatalf("after herd jobs was refused: %d partitions, kind %q; want the 4 partitions unchanged", n, kind)
	}

	k := startHerd(t, "keys", nil, "jobs", "--store", url, "--group", "chores", "--every", "1h", "--keys", "x,y", "--ttl", "2s", "--", "true")
	eventually(t, 20*time.Second, "the jobs member joined", func() bool { return strings.Contains(k.out.String(), "joined") })
	r := startRun(t, "run", nil, "--store", url, "--group", "chores", "--partitions", "0-1", "--", "true")
	if code := exitStatus(t, r.wait(t, 30*time.Second)); code != exitInUse {
		t.Fatalf("herd run in a group of herd jobs: exit status %d, output:\n%s\nwant %d", code, r.out.String(), exitInUse)
	}
	// herd status shows a jobs group as its blackboard without --jobs.
	out, err := exec.Command(filepath.Join(buildHerd(t), "herd"), "status", "--store", url, "--group", "chores").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "KEY") || strings.Contains(string(out), "CHECKPOINT") {
		t.Fatalf("herd status of a jobs group without --jobs: %v\n%s\nwant the blackboard (KEY ...), not the partitions", err, out)
	}
}

// A member of a group with no partition set says what to do.
func TestRunWithoutPartitionSetWarns(t *testing.T) {
	url := "sqlite://" + filepath.Join(t.TempDir(), "h.db")
	m := startRun(t, "a", nil, "--store", url, "--group", "fresh", "--", "true")
	eventually(t, 20*time.Second, "a warning about the missing partition set", func() bool {
		out := m.out.String()
		return strings.Contains(out, "level=WARN") && strings.Contains(out, "no partition set") && strings.Contains(out, "herd partitions set")
	})
}

// A store that accepts connections and never answers: herd run and herd
// jobs say where they connect (without the password), retry until
// --join-timeout, and exit with the "store unreachable" status.
func TestMemberGivesUpOnStoreThatNeverAnswers(t *testing.T) {
	addr := blackhole.Listen(t)
	for _, tc := range []struct{ name, url string }{
		{"postgres", "postgres://herd:s3cretpw@" + addr + "/test"},
		{"redis", "redis://:s3cretpw@" + addr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, cmd := range [][]string{
				{"run", "--store", tc.url, "--group", "g", "--join-timeout", "2s", "--", "true"},
				{"jobs", "--store", tc.url, "--group", "g", "--every", "1h", "--join-timeout", "2s", "--", "true"},
			} {
				start := time.Now()
				m := startHerd(t, cmd[0], nil, cmd...)
				code := exitStatus(t, m.wait(t, 30*time.Second))
				out := m.out.String()
				if code != exitUnreachable || !strings.Contains(out, "connecting to ") || strings.Contains(out, "s3cretpw") {
					t.Fatalf("herd %s against a store that never answers: exit status %d after %v, output:\n%s\nwant %d, "+
						"a line saying where it connects, and no password", cmd[0], code, time.Since(start), out, exitUnreachable)
				}
			}
		})
	}
}
