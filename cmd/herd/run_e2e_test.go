package main

// herd run end to end: real processes killed, children recorded, partitions taken over.

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runEvent is one line of the child's log.
type runEvent struct {
	kind, part, member string
	pid, pgid          int
	n                  int // start: the checkpoint it began from; saved: the value
}

func readEvents(t *testing.T, path string) []runEvent {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var evs []runEvent
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue // a line being written
		}
		ev := runEvent{kind: f[0], part: f[1]}
		switch {
		case ev.kind == "start" && len(f) == 6:
			ev.member = f[2]
			ev.pid, _ = strconv.Atoi(f[3])
			ev.pgid, _ = strconv.Atoi(f[4])
			ev.n, _ = strconv.Atoi(f[5])
		case ev.kind == "saved" && len(f) == 3:
			ev.n, _ = strconv.Atoi(f[2])
		case (ev.kind == "stop" || ev.kind == "overlap" || ev.kind == "fail") && len(f) == 4:
			ev.member = f[2]
			ev.pid, _ = strconv.Atoi(f[3])
		case ev.kind == "fenced":
		default:
			continue
		}
		evs = append(evs, ev)
	}
	return evs
}

// partRun is, per partition, its latest start and the saves since.
type partRun struct {
	start runEvent
	saves int
}

func current(evs []runEvent) map[string]*partRun {
	cur := map[string]*partRun{}
	for _, ev := range evs {
		switch ev.kind {
		case "start":
			cur[ev.part] = &partRun{start: ev}
		case "saved":
			if r := cur[ev.part]; r != nil {
				r.saves++
			}
		}
	}
	return cur
}

// Three herd run processes share six partitions through Redis; one is killed
// with SIGKILL. Its partitions run again within TTL + 1 s, its children die
// with it, no partition ever has two live children (the lock in the child),
// and no saved counter goes backwards.
func TestRunE2EKill(t *testing.T) {
	u, _, _ := redisURL(t)
	testRunE2EKill(t, t.TempDir(), []string{"--store", u}, 2*time.Second, 3*time.Second)
}

// The same with no --store, in a fresh directory: the members meet in the
// default store, the SQLite file herd.db there (their sessions tied to
// their processes: --tie-session auto).
func TestRunE2EKillSQLite(t *testing.T) {
	dir := t.TempDir()
	testRunE2EKill(t, dir, nil, 2*time.Second, 3*time.Second, "HERD_STORE=")
	if _, err := os.Stat(filepath.Join(dir, "herd.db")); err != nil {
		t.Errorf("no herd.db in the working directory of herd run without --store: %v", err)
	}
}

// On SQLite a member's session is tied to a lock of its process by
// default (--tie-session auto): with a TTL of 10 s, the killed member's
// partitions run elsewhere within 3 s, its children dead first.
func TestRunE2EKillSQLiteTied(t *testing.T) {
	dir := t.TempDir()
	testRunE2EKill(t, dir, []string{"--store", "sqlite://" + filepath.Join(dir, "tied.db")}, 10*time.Second, 3*time.Second)
}

// testRunE2EKill runs three members in dir with storeArgs (and env), the
// session TTL ttl, and kills one: its partitions must run elsewhere within
// within of the kill.
func testRunE2EKill(t *testing.T, dir string, storeArgs []string, ttl, within time.Duration, env ...string) {
	testRunE2EDeath(t, dir, storeArgs, ttl, within, death{kill: func(t *testing.T, m *member) time.Time {
		at := time.Now()
		if err := m.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		return at
	}}, env...)
}

// death is how testRunE2EDeath's member m2 dies: env is added to its
// environment, started is called once it runs, and kill kills it once the
// fleet is balanced and returns when it died (at the latest).
type death struct {
	env     []string
	started func(t *testing.T, m *member)
	kill    func(t *testing.T, m *member) time.Time
}

// testRunE2EDeath is testRunE2EKill with m2 killed by how.
func testRunE2EDeath(t *testing.T, dir string, storeArgs []string, ttl, within time.Duration, how death, env ...string) {
	buildHerd(t)
	script := filepath.Join(dir, "child.sh")
	if err := os.WriteFile(script, []byte(e2eChild), 0o644); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "log")
	env = append(env, "RUN_LOG="+logPath, "RUN_DIR="+dir)
	const parts = 6
	members := map[string]*member{}
	metricsAt := freeLoopbackAddr(t) // m1 serves /metrics and /healthz
	for _, name := range []string{"m1", "m2", "m3"} {
		args := append(slices.Clone(storeArgs), "--group", "e2e", "--member", name,
			"--partitions", "0-5", "--ttl", ttl.String(), "--max-shutdown", "2s",
			"--restart-delay", "50ms", "--restart-max", "500ms")
		if name == "m1" {
			args = append(args, "--metrics", metricsAt)
		}
		menv := env
		if name == "m2" {
			menv = append(slices.Clone(env), how.env...)
		}
		members[name] = startRunIn(t, name, dir, menv, append(args, "--", "/bin/sh", script)...)
		if name == "m2" && how.started != nil {
			how.started(t, members[name])
		}
	}

	// Balanced: two partitions each, every child has saved twice.
	var before map[string]*partRun
	eventually(t, 60*time.Second, "six partitions running, two per member, each saved twice", func() bool {
		before = current(readEvents(t, logPath))
		per := map[string]int{}
		for _, r := range before {
			if r.saves < 2 {
				return false
			}
			per[r.start.member]++
		}
		return len(before) == parts && per["m1"] == 2 && per["m2"] == 2 && per["m3"] == 2
	})
	checkRunMetrics(t, metricsAt)
	var moved []string
	var pgids []int
	for p, r := range before {
		if r.start.member == "m2" {
			moved = append(moved, p)
			pgids = append(pgids, r.start.pgid)
		}
	}
	killedAt := len(readEvents(t, logPath))
	killT := how.kill(t, members["m2"])
	eventually(t, within-time.Since(killT), "the killed member's partitions running elsewhere", func() bool {
		evs := readEvents(t, logPath)
		for _, p := range moved {
			found := false
			for _, ev := range evs[min(killedAt, len(evs)):] {
				found = found || (ev.kind == "start" && ev.part == p && ev.member != "m2")
			}
			if !found {
				return false
			}
		}
		return true
	})
	took := time.Since(killT)
	t.Logf("partitions %v of the killed member ran again after %v (TTL %v)", moved, took.Round(time.Millisecond), ttl)
	_ = members["m2"].wait(t, 5*time.Second)
	for _, g := range pgids {
		if left := groupAlive(g); len(left) > 0 {
			t.Errorf("processes %v of the killed member's child group %d still alive after its partitions moved", left, g)
		}
	}

	// Let the moved partitions save, then stop the others gracefully.
	eventually(t, 30*time.Second, "moved partitions saving", func() bool {
		cur := current(readEvents(t, logPath))
		for _, p := range moved {
			if cur[p].saves < 2 {
				return false
			}
		}
		return true
	})
	for _, name := range []string{"m1", "m3"} {
		if err := members[name].cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"m1", "m3"} {
		if err := members[name].wait(t, 30*time.Second); err != nil {
			t.Errorf("%s: %v; want a clean exit after SIGTERM", name, err)
		}
	}

	checkDeathHistory(t, readEvents(t, logPath), "m2")
}

// checkDeathHistory checks the children's history evs after member dead
// was killed and the others stopped gracefully: no two live children of a
// partition, no checkpoint backwards, a stop line for every child of the
// others, and no process of any child left.
func checkDeathHistory(t *testing.T, evs []runEvent, dead string) {
	t.Helper()
	last := map[string]int{}
	stopped := map[int]bool{}
	for _, ev := range evs {
		switch ev.kind {
		case "overlap":
			t.Errorf("partition %s: a child of %s started while another child of it was alive", ev.part, ev.member)
		case "start":
			if ev.n < last[ev.part] {
				t.Errorf("partition %s: child of %s started from checkpoint %d, below the saved %d", ev.part, ev.member, ev.n, last[ev.part])
			}
		case "saved":
			if ev.n <= last[ev.part] {
				t.Errorf("partition %s: saved %d after %d", ev.part, ev.n, last[ev.part])
			}
			last[ev.part] = ev.n
		case "stop":
			stopped[ev.pid] = true
		}
	}
	for _, ev := range evs {
		if ev.kind != "start" {
			continue
		}
		if ev.member != dead && !stopped[ev.pid] {
			t.Errorf("child %d of partition %s on %s got no SIGTERM (no stop line)", ev.pid, ev.part, ev.member)
		}
		if left := groupAlive(ev.pgid); len(left) > 0 {
			t.Errorf("processes %v of child group %d (partition %s, %s) outlived herd run", left, ev.pgid, ev.part, ev.member)
		}
	}
}

// A child that ignores SIGTERM is killed with SIGKILL once --max-shutdown
// has passed after herd run began to leave.
func TestRunKillsChildIgnoringSIGTERM(t *testing.T) {
	const grace = 500 * time.Millisecond
	m := startRun(t, "m", nil, "--store", "sqlite://"+filepath.Join(t.TempDir(), "herd.db"), "--group", "g", "--partitions", "0", "--max-shutdown", grace.String(),
		"--", "sh", "-c", stubbornChild)
	pgid := readyGroup(t, m)
	began := time.Now()
	if err := m.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := m.wait(t, 30*time.Second); err != nil {
		t.Errorf("herd run: %v; want a clean exit", err)
	}
	if took := time.Since(began); took < grace {
		t.Errorf("herd run left after %v, before --max-shutdown %v", took, grace)
	}
	if !strings.Contains(m.out.String(), "did not exit within --max-shutdown after SIGTERM; killed") {
		t.Errorf("no word of the SIGKILL in the output:\n%s", m.out.String())
	}
	if left := groupAlive(pgid); len(left) > 0 {
		t.Errorf("processes %v of the child's group alive after herd run exited", left)
	}
}
