package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/redisstore"
)

// The child of the give-back test: it fails at once (exit 3) where a marker
// file names its member and partition, and otherwise runs until SIGTERM.
const givebackChild = `
if [ -e "$RUN_DIR/fail.$HERD_MEMBER.$HERD_PARTITION" ]; then
  echo "fail $HERD_PARTITION $HERD_MEMBER $$" >> "$RUN_LOG"; exit 3
fi
echo "start $HERD_PARTITION $HERD_MEMBER $$ 0 0" >> "$RUN_LOG"
trap 'echo "stop $HERD_PARTITION $HERD_MEMBER $$" >> "$RUN_LOG"; exit 0' TERM
while :; do sleep 0.05 & wait $!; done
`

// Three herd run processes share six partitions through Redis. The child of
// one partition P on m1 is killed, and from then on fails at once on m1 (a
// marker file) but not elsewhere. After --max-failures 3 failures in a row
// (the kill, then two exits with status 3) m1 gives P back, with a WARN line
// naming P and the last exit status; P then runs on another member and
// stays there, m1 never starts it again, and the store's record of P is
// marked as given back by m1's live session. (The TTL is 5 s, not 2: with
// 2 s on a machine loaded by other tests, Redis calls timed out and every
// member fenced itself and opened a new session; the mark then names a
// session that has ended, and P was placed anew, as it should be.)
func TestRunGivesBackFailingPartition(t *testing.T) {
	u, _, _ := redisURL(t)
	buildHerd(t)
	dir := t.TempDir()
	script := filepath.Join(dir, "child.sh")
	if err := os.WriteFile(script, []byte(givebackChild), 0o644); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "log")
	env := []string{"RUN_LOG=" + logPath, "RUN_DIR=" + dir}
	const group = "giveback"
	members := map[string]*member{}
	for _, name := range []string{"m1", "m2", "m3"} {
		members[name] = startRun(t, name, env, "--store", u, "--group", group, "--member", name,
			"--partitions", "0-5", "--ttl", "5s", "--max-shutdown", "2s",
			"--restart-delay", "50ms", "--restart-max", "2s", "--max-failures", "3",
			"--", "/bin/sh", script)
	}
	var cur map[string]*partRun
	eventually(t, 60*time.Second, "six partitions running, two per member", func() bool {
		cur = current(readEvents(t, logPath))
		per := map[string]int{}
		for _, r := range cur {
			per[r.start.member]++
		}
		return len(cur) == 6 && per["m1"] == 2 && per["m2"] == 2 && per["m3"] == 2
	})
	var p string
	var pid int
	for q, r := range cur {
		if r.start.member == "m1" {
			p, pid = q, r.start.pid
			break
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "fail.m1."+p), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killedAt := len(readEvents(t, logPath))

	var now string
	eventually(t, 30*time.Second, "partition "+p+" running on another member", func() bool {
		evs := readEvents(t, logPath)
		for _, ev := range evs[min(killedAt, len(evs)):] {
			if ev.kind == "start" && ev.part == p && ev.member != "m1" {
				now = ev.member
				return true
			}
		}
		return false
	})
	out := members["m1"].out.String()
	warn := ""
	for line := range strings.Lines(out) {
		if strings.Contains(line, "giving the partition back") {
			warn = line
		}
	}
	if !strings.Contains(warn, "level=WARN") || !strings.Contains(warn, "partition="+p+" ") ||
		!strings.Contains(warn, `how="exit status 3"`) || !strings.Contains(warn, "failures_in_a_row=3") {
		t.Errorf("m1's give-back line %q; want a WARN naming partition %s, its last exit status 3 and the 3 failures", warn, p)
	}

	// The mark, as herd status reads it.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := redisstore.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	snap, err := st.Snapshot(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	m1 := ""
	for _, s := range snap.Sessions {
		if s.Member == "m1" {
			m1 = s.ID
		}
	}
	var rec store.Ownership
	for _, o := range snap.Owners {
		if o.Partition == p {
			rec = o
		}
	}
	if m1 == "" || rec.GivenBack != m1 || rec.Member != now {
		t.Errorf("record of %s: %+v, m1's session %q; want owned by %s and given back by m1's live session", p, rec, m1, now)
	}
	// And as herd status shows it.
	out, err = execute(t, "status", "--store", u, "--group", group, "--json")
	if err != nil {
		t.Fatalf("herd status: %v\n%s", err, out)
	}
	var rep statusReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Groups) != 1 {
		t.Fatalf("herd status --json: %v\n%s", err, out)
	}
	g := rep.Groups[0]
	for _, ps := range g.Partitions {
		if ps.Partition == p && (ptrVal(ps.GivenBackBy) != "m1" || ptrVal(ps.GivenBackSess) != m1 || ptrVal(ps.Member) != now) {
			t.Errorf("herd status shows partition %s as %+v; want running on %s, given back by m1", p, ps, now)
		}
	}
	if g.Counts.GivenBack != 1 {
		t.Errorf("herd status counts %+v; want 1 given back", g.Counts)
	}
	text, err := execute(t, "status", "--store", u, "--group", group)
	if err != nil || !strings.Contains(text, "1 given back") || !strings.Contains(text, "given back by m1") {
		t.Errorf("herd status (text): %v; want the count and the note of the partition given back by m1:\n%s", err, text)
	}

	// It stays where it went: m1 neither fails nor starts it again.
	time.Sleep(3 * time.Second)
	evs := readEvents(t, logPath)
	fails, startsAfter := 0, 0
	for _, ev := range evs[killedAt:] {
		if ev.part != p {
			continue
		}
		switch {
		case ev.kind == "fail" && ev.member == "m1":
			fails++
		case ev.kind == "start":
			startsAfter++
			if ev.member != now {
				t.Errorf("partition %s started on %s after it went to %s", p, ev.member, now)
			}
		}
	}
	if fails != 2 || startsAfter != 1 {
		t.Errorf("after the kill, partition %s failed %d times on m1 and started %d times elsewhere; want 2 failures (the kill being the first of 3) and 1 start", p, fails, startsAfter)
	}
	for _, m := range members {
		if err := m.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	for name, m := range members {
		if err := m.wait(t, 30*time.Second); err != nil {
			t.Errorf("%s: %v; want a clean exit after SIGTERM", name, err)
		}
	}
	if t.Failed() {
		b, _ := os.ReadFile(logPath)
		fmt.Fprintf(os.Stderr, "children's log:\n%s", b)
	}
}

// streak gives back after max failures in a row; an exit with status 0 or
// a long run ends the streak; max 0 never gives back.
func TestStreak(t *testing.T) {
	type exit struct {
		ok  bool
		ran time.Duration
	}
	fail, okExit, longFail := exit{false, 0}, exit{true, 0}, exit{false, time.Minute}
	for _, tc := range []struct {
		name  string
		max   int
		exits []exit
		want  []bool // give back after each exit
	}{
		{"three failures", 3, []exit{fail, fail, fail}, []bool{false, false, true}},
		{"an exit 0 ends the streak", 3, []exit{fail, fail, okExit, fail, fail, fail}, []bool{false, false, false, false, false, true}},
		{"a long run ends the streak", 3, []exit{fail, fail, longFail, fail, fail}, []bool{false, false, false, false, true}},
		{"max 1", 1, []exit{fail}, []bool{true}},
		{"max 0: never", 0, []exit{fail, fail, fail, fail, fail}, []bool{false, false, false, false, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := streak{max: tc.max, longRun: 10 * time.Second}
			for i, e := range tc.exits {
				if got := s.exited(e.ok, e.ran); got != tc.want[i] {
					t.Fatalf("exit %d (%+v): give back %v; want %v", i+1, e, got, tc.want[i])
				}
			}
		})
	}
}
