package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/herdhq/herd"
)

// The child of the herd jobs end-to-end test: it holds an exclusive lock on
// a file of its key for as long as any process of its group lives, so a
// second run of the key under way at the same time, on any member, finds
// the lock taken and says so. A run takes 1.2 s; SIGTERM ends it early.
const jobsChild = `
exec 9>"$RUN_DIR/lock.$HERD_KEY"
if ! flock -n 9; then echo "overlap $HERD_KEY $HERD_MEMBER $$ $HERD_SLOT" >> "$RUN_LOG"; exit 1; fi
pg=$(cut -d' ' -f5 /proc/$$/stat)
echo "start $HERD_KEY $HERD_MEMBER $$ $pg $HERD_SLOT $HERD_ATTEMPT $1" >> "$RUN_LOG"
trap 'echo "stop $HERD_KEY $HERD_MEMBER $$ $pg $HERD_SLOT" >> "$RUN_LOG"; exit 143' TERM
sleep 1.2 & wait $!
echo "done $HERD_KEY $HERD_MEMBER $$ $pg $HERD_SLOT" >> "$RUN_LOG"
`

// jobEvent is one line of the jobs child's log.
type jobEvent struct {
	kind, key, member string
	pid, pgid         int
	slot              string
	attempt           int
	arg               string // start: the {key} substituted in the arguments
	at                time.Time
}

func readJobEvents(t *testing.T, path string, seen map[string]time.Time) []jobEvent {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var evs []jobEvent
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		if len(f) < 5 {
			continue // a line being written
		}
		if _, ok := seen[line]; !ok {
			seen[line] = time.Now() // when the test first saw it
		}
		ev := jobEvent{kind: f[0], key: f[1], member: f[2], at: seen[line]}
		ev.pid, _ = strconv.Atoi(f[3])
		switch {
		case ev.kind == "start" && len(f) == 8:
			ev.pgid, _ = strconv.Atoi(f[4])
			ev.slot = f[5]
			ev.attempt, _ = strconv.Atoi(f[6])
			ev.arg = f[7]
		case (ev.kind == "stop" || ev.kind == "done") && len(f) == 6:
			ev.pgid, _ = strconv.Atoi(f[4])
			ev.slot = f[5]
		case ev.kind == "overlap" && len(f) == 5:
			ev.slot = f[4]
		default:
			continue
		}
		evs = append(evs, ev)
	}
	return evs
}

// Three herd jobs processes share six keys, every 5 s, through Redis; each
// run takes 1.2 s. One member is killed with SIGKILL during a run: its
// children die with it, and the runs it had under way start again, same
// slot, a later attempt, on another member within TTL + 1 s. No key ever
// has two runs at once (the lock in the child), no slot starts twice as a
// first attempt, every key runs about once per interval, and the members
// stopped with SIGTERM exit 0 after ending their runs.
func TestJobsE2EKill(t *testing.T) {
	u, _, _ := redisURL(t)
	testJobsE2EKill(t, u)
}

// testJobsE2EKill runs TestJobsE2EKill's members on the store at u.
func testJobsE2EKill(t *testing.T, u string) {
	buildHerd(t)
	dir := t.TempDir()
	script := filepath.Join(dir, "child.sh")
	if err := os.WriteFile(script, []byte(jobsChild), 0o644); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "log")
	env := []string{"RUN_LOG=" + logPath, "RUN_DIR=" + dir}
	const ttl = 2 * time.Second
	const every = 5 * time.Second
	members := map[string]*member{}
	began := time.Now()
	for _, name := range []string{"m1", "m2", "m3"} {
		members[name] = startHerd(t, name, env, "jobs", "--store", u, "--group", "e2e-jobs", "--member", name,
			"--keys", "0-5", "--every", every.String(), "--ttl", ttl.String(), "--max-shutdown", "2s",
			"--retry-delay", "100ms", "--retry-max", "500ms", "--", "/bin/sh", script, "{key}")
	}
	seen := map[string]time.Time{}
	events := func() []jobEvent { return readJobEvents(t, logPath, seen) }

	// Every member runs keys, and every key has run twice.
	eventually(t, 60*time.Second, "every key run twice, on all three members", func() bool {
		per, on := map[string]int{}, map[string]bool{}
		for _, ev := range events() {
			if ev.kind == "start" {
				per[ev.key]++
				on[ev.member] = true
			}
		}
		for k := range 6 {
			if per[strconv.Itoa(k)] < 2 {
				return false
			}
		}
		return len(on) == 3
	})

	// Kill m2 while it has a run under way that began less than 0.5 s ago
	// (so it is still running when the kill lands).
	var victims []jobEvent
	eventually(t, 30*time.Second, "m2 in the middle of a run", func() bool {
		ended := map[int]bool{}
		evs := events()
		for _, ev := range evs {
			if ev.kind == "stop" || ev.kind == "done" {
				ended[ev.pid] = true
			}
		}
		victims = victims[:0]
		for _, ev := range evs {
			if ev.kind == "start" && ev.member == "m2" && !ended[ev.pid] && time.Since(ev.at) < 500*time.Millisecond {
				victims = append(victims, ev)
			}
		}
		return len(victims) > 0
	})
	killT := time.Now()
	if err := members["m2"].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, ttl+time.Second-time.Since(killT), "the killed member's runs run again elsewhere", func() bool {
		evs := events()
		for _, v := range victims {
			found := false
			for _, ev := range evs {
				found = found || (ev.kind == "start" && ev.key == v.key && ev.slot == v.slot && ev.member != "m2" && ev.attempt > v.attempt)
			}
			if !found {
				return false
			}
		}
		return true
	})
	var names []string
	for _, v := range victims {
		names = append(names, "key "+v.key+" slot "+v.slot)
	}
	t.Logf("runs of the killed member (%s) started again after %v (TTL %v)", strings.Join(names, ", "), time.Since(killT).Round(time.Millisecond), ttl)
	_ = members["m2"].wait(t, 5*time.Second)
	for _, v := range victims {
		if left := groupAlive(v.pgid); len(left) > 0 {
			t.Errorf("processes %v of the killed member's run of key %s still alive", left, v.key)
		}
	}

	// A few more intervals on two members, then a graceful stop.
	time.Sleep(2 * every)
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
	elapsed := time.Since(began)

	evs := events()
	ended := map[int]bool{}
	for _, ev := range evs {
		if ev.kind == "stop" || ev.kind == "done" {
			ended[ev.pid] = true
		}
	}
	firsts := map[string]bool{}
	slots := map[string]map[string]bool{}
	for _, ev := range evs {
		switch ev.kind {
		case "overlap":
			t.Errorf("key %s: a run of slot %s on %s started while another run of the key was under way", ev.key, ev.slot, ev.member)
		case "start":
			if ev.arg != ev.key {
				t.Errorf("{key} was replaced by %q for key %s", ev.arg, ev.key)
			}
			if ev.attempt == 1 {
				if firsts[ev.key+" "+ev.slot] {
					t.Errorf("key %s: slot %s started twice as a first attempt", ev.key, ev.slot)
				}
				firsts[ev.key+" "+ev.slot] = true
			}
			if slots[ev.key] == nil {
				slots[ev.key] = map[string]bool{}
			}
			slots[ev.key][ev.slot] = true
			if ev.member != "m2" && !ended[ev.pid] {
				t.Errorf("run %d of key %s on %s neither ended nor got SIGTERM", ev.pid, ev.key, ev.member)
			}
			if left := groupAlive(ev.pgid); len(left) > 0 {
				t.Errorf("processes %v of the run of key %s on %s outlived herd jobs", left, ev.key, ev.member)
			}
		}
	}
	// About one slot per key per interval since the start (the first slot
	// of a key comes up to one interval after the members joined, and the
	// takeover costs up to a TTL).
	want := int(elapsed/every) - 3
	for k := range 6 {
		if n := len(slots[strconv.Itoa(k)]); n < want || n > int(elapsed/every)+1 {
			t.Errorf("key %d ran %d slots in %v; want about one per %v (at least %d)", k, n, elapsed.Round(time.Millisecond), every, want)
		}
	}
}

// Every flag of jobs is checked before anything runs.
func TestJobsRejects(t *testing.T) {
	j := func(extra ...string) []string {
		return append([]string{"jobs", "--store", "mem://", "--group", "g"}, extra...)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{j("--every", "1h"), "requires at least 1 arg(s)"},
		{j("--", "true"), "no schedule: give --every"},
		{j("--every", "1h", "--cron", "0 * * * *", "--", "true"), "--every and --cron are both set"},
		{j("--every", "10ms", "--", "true"), "--every must be between 1s and 8784h0m0s (got 10ms)"},
		{j("--cron", "0 6 * *", "--", "true"), "--cron: jobs: cron expression"},
		{j("--cron", "@every 1h", "--", "true"), "@every is not supported"},
		{j("--every", "1h", "--max-concurrent", "0", "--", "true"), "--max-concurrent must be between 1 and 10,000 (got 0)"},
		{j("--every", "1h", "--timeout", "-1s", "--", "true"), "--timeout must be between 0s"},
		{j("--every", "1h", "--retry-delay", "2s", "--retry-max", "1s", "--", "true"), "--retry-max must be between 2s and 24h0m0s (got 1s)"},
		{j("--every", "1h", "--ttl", "5ms", "--", "true"), "--ttl must be between 10ms and 1h0m0s (got 5ms)"},
		{j("--every", "1h", "--keys", "a,,b", "--", "true"), "--keys: key id is empty"},
		{j("--every", "1h", "--keys", "a,b,a", "--", "true"), `--keys: "a" appears twice`},
		{j("--every", "1h", "--member", "a\tb", "--", "true"), "--member: member id"},
		{j("--every", "1h", "--", ""), "no command"},
		{[]string{"jobs", "--store", "ftp://x", "--group", "g", "--every", "1h", "--", "true"}, `--store: unknown scheme "ftp"`},
		{j("--every", "1h", "--", "true"), "--store mem:// is this process's own store: every herd jobs would have a store of its own"},
		{[]string{"bench", "--scenario", "jobs", "--every", "10ms"}, "--every must be between 1s and 24h0m0s (got 10ms)"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, err := execute(t, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("herd %q: error %v; want one containing %q (output %q)", tc.args, err, tc.want, out)
			}
		})
	}
}

// A run's exit status is its result: a failing child is retried, its
// error logged; {slot} and the environment are set.
func TestJobsExitStatusIsTheResult(t *testing.T) {
	m := startHerd(t, "m", nil, "jobs", "--store", "sqlite://"+filepath.Join(t.TempDir(), "herd.db"), "--group", "g", "--keys", "ok,bad", "--every", "1s",
		"--retry-delay", "50ms", "--retry-max", "100ms",
		"--", "sh", "-c", `echo "ran $HERD_KEY slot=$HERD_SLOT arg={slot} attempt=$HERD_ATTEMPT epoch=$HERD_EPOCH group=$HERD_GROUP"; [ "$HERD_KEY" = ok ] || exit 7`)
	eventually(t, 30*time.Second, "the failing key retried twice", func() bool {
		return strings.Contains(m.out.String(), "[bad] ran bad") && strings.Contains(m.out.String(), "attempt=3")
	})
	if err := m.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := m.wait(t, 30*time.Second); err != nil {
		t.Errorf("herd jobs: %v; want a clean exit", err)
	}
	out := m.out.String()
	if !strings.Contains(out, `msg="run failed"`) || !strings.Contains(out, `err="exit status 7"`) {
		t.Errorf("the failure is not logged with its status:\n%s", out)
	}
	for line := range strings.Lines(out) {
		if !strings.HasPrefix(line, "[ok] ran ok ") {
			continue
		}
		f := strings.Fields(line)
		slot, arg := strings.TrimPrefix(f[3], "slot="), strings.TrimPrefix(f[4], "arg=")
		if _, err := time.Parse(time.RFC3339Nano, slot); err != nil || slot != arg {
			t.Errorf("HERD_SLOT %q and {slot} %q: want the same RFC 3339 time (%v)", slot, arg, err)
		}
		if f[5] != "attempt=1" || f[6] == "epoch=" || f[7] != "group=g" {
			t.Errorf("environment of a run: %q", line)
		}
	}
	if strings.Contains(out, "[ok] ran ok") && strings.Contains(out, `key=ok`) && strings.Contains(out, "run failed") &&
		strings.Contains(out, `key=ok slot`) {
		t.Errorf("the succeeding key was logged as failed:\n%s", out)
	}
}

// bench --scenario jobs runs and reports its figures (the figures
// themselves are for docs/jobs.md, not checked here, but for the two
// checkpoint writes each run costs).
func TestBenchJobs(t *testing.T) {
	var out bytes.Buffer
	err := runBench(t.Context(), &out, benchOpts{storeURL: "mem://", ttl: herd.DefaultSessionTTL, steadyFor: time.Second,
		scenarios: []string{"jobs"}, partitions: 50, every: time.Second, jsonOut: true})
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, out.String())
	}
	var r benchResult
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	j := r.Jobs
	if r.Scenario != "jobs" || j == nil || j.KeysRun != 50 || j.Runs < 80 || j.Runs > 120 ||
		j.CheckpointWritesPerRun < 1.9 || j.CheckpointWritesPerRun > 2.1 || j.LatenessP99Seconds < j.LatenessP50Seconds {
		t.Errorf("figures: %s", out.String())
	}
}

// Without --store, herd jobs meets its fellow members in herd.db, an SQLite
// file in the working directory, as herd run does.
func TestJobsDefaultStore(t *testing.T) {
	dir := t.TempDir()
	m := startHerdIn(t, "m", dir, nil, "jobs", "--group", "g", "--keys", "a", "--every", "1s",
		"--", "sh", "-c", `echo "ran $HERD_KEY"`)
	eventually(t, 30*time.Second, "a run on the default store", func() bool {
		return strings.Contains(m.out.String(), "[a] ran a")
	})
	if err := m.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := m.wait(t, 30*time.Second); err != nil {
		t.Errorf("herd jobs: %v; want a clean exit", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "herd.db")); err != nil {
		t.Errorf("no herd.db in the working directory: %v", err)
	}
}
