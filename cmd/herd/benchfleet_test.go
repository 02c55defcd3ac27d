package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// herdExe is the built herd binary, which the bench re-executes as its
// members (the test binary is not herd).
func herdExe(t *testing.T) string { return filepath.Join(buildHerd(t), "herd") }

// fleetBench runs scale-out and crash with 64 partitions on member
// processes, checks that the figures are sane (not how fast: the machine
// is shared), and whether the store server's CPU was measured.
func fleetBench(t *testing.T, storeURL string, serverCPU bool) {
	t.Helper()
	var out bytes.Buffer
	// A TTL of 3 s: member processes fence themselves TTL/10 before their
	// session can expire, and a member starved of CPU for longer than that
	// margin (100 ms at a TTL of 1 s, seen under a load average of 30) can
	// overlap its successor, which this test counts.
	o := benchOpts{storeURL: storeURL, jsonOut: true, ttl: 3 * time.Second, steadyFor: time.Second, partitions: 64,
		scenarios: []string{"scale-out", "crash"}, memberExe: herdExe(t)}
	if err := runBench(t.Context(), &out, o); err != nil {
		t.Fatalf("bench: %v\n%s", err, out.String())
	}
	n := 0
	for sc := bufio.NewScanner(&out); sc.Scan(); n++ {
		var r benchResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("bad JSON line %q: %v", sc.Text(), err)
		}
		if !r.MemberProcesses || r.JoinFailures != 0 || r.Partitions != 64 {
			t.Errorf("%s: %+v; want member processes, all joined, 64 partitions", r.Scenario, r)
		}
		if r.MaxConcurrentOwners != 1 || r.Moves < r.MinMoves || r.MinMoves == 0 || r.SecondsToBalance <= 0 || r.SecondsToSettle < r.SecondsToBalance {
			t.Errorf("%s: %+v; want one owner at a time, moves >= min moves > 0, settled after balanced", r.Scenario, r)
		}
		if r.StoreOpsPerMember <= 0 || r.RowsReadPerMember <= 0 {
			t.Errorf("%s: %+v; want store operations and rows read counted", r.Scenario, r)
		}
		if (r.ServerCPUSeconds != nil) != serverCPU || (serverCPU && *r.ServerCPUSeconds < 0) {
			t.Errorf("%s: server CPU %v; want measured: %v", r.Scenario, r.ServerCPUSeconds, serverCPU)
		}
		if r.MemberPeakRSSBytesMax < 1<<20 || r.MemberCPUSecondsMax < r.MemberCPUSecondsP50 || r.MemberCPUSecondsP50 < 0 {
			t.Errorf("%s: %+v; want a peak RSS of at least 1 MiB and CPU seconds p50 <= max", r.Scenario, r)
		}
	}
	if n != 2 {
		t.Fatalf("bench printed %d JSON lines, want 2:\n%s", n, out.String())
	}
	if ms := benchMembersOf(t, os.Getpid()); len(ms) > 0 {
		t.Errorf("member processes left after the bench: %v", ms)
	}
}

func TestBenchFleetSQLite(t *testing.T) {
	fleetBench(t, "sqlite://"+filepath.Join(t.TempDir(), "bench.db"), false) // no server
}

func TestBenchFleetRedis(t *testing.T) {
	u, prefix, raw := redisURL(t)
	fleetBench(t, u, true)
	noKeys(t, raw, prefix)
}

// On PostgreSQL on this host, the server's CPU is read from /proc.
func TestBenchFleetPostgres(t *testing.T) {
	u, schema := pgURL(t)
	fleetBench(t, u, true)
	noRows(t, schema)
}

func TestOnThisHost(t *testing.T) {
	for u, want := range map[string]bool{
		"postgres://herd@127.0.0.1/test":              true,
		"postgres://herd@localhost:5432/test":         true,
		"postgres:///test?host=/var/run/postgresql":   true,
		"postgres://herd@[::1]/test":                  true,
		"postgres://herd@db.internal/test":            false,
		"postgres://herd@10.0.0.5/test":               false,
		"postgres://herd@localhost/test?host=db.corp": false,
	} {
		if got := onThisHost(u); got != want {
			t.Errorf("onThisHost(%q) = %v, want %v", u, got, want)
		}
	}
}

// benchMembersOf lists the pids of the bench member processes whose parent
// is pid and that are not yet reaped (a zombie counts: nobody reaped it).
func benchMembersOf(t *testing.T, pid int) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatalf("listing processes: %v", err)
	}
	var out []int
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, ok := parentOf(p); ok && ppid == pid && isBenchMember(p) {
			out = append(out, p)
		}
	}
	return out
}

// parentOf is a process's parent pid, from /proc/PID/stat.
func parentOf(pid int) (int, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]) // state, ppid, ...
	if len(f) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(f[1])
	return ppid, err == nil
}

// isBenchMember says whether pid runs herd __bench-member (or, once a
// zombie, was a herd whose command line is gone: counted too).
func isBenchMember(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	if len(b) == 0 {
		comm, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
		return strings.TrimSpace(string(comm)) == "herd"
	}
	return bytes.Contains(b, []byte("__bench-member"))
}

// alive says whether pid still runs (a zombie does not: it is dead,
// waiting for its parent or init to reap it).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

// startBenchBin starts the built herd bench on Redis and waits until its
// member processes run; it returns the bench and their pids.
func startBenchBin(t *testing.T, u string) (*exec.Cmd, []int) {
	t.Helper()
	cmd := exec.Command(herdExe(t), "bench", "--store", u, "--scenario", "crash", "--ttl", "2s", "--partition-count", "64")
	var errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &errOut, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() }) //nolint:errcheck // it may have exited
	deadline := time.Now().Add(30 * time.Second)
	for {
		if ms := benchMembersOf(t, cmd.Process.Pid); len(ms) == 4 {
			return cmd, ms
		}
		if time.Now().After(deadline) {
			t.Fatalf("the bench did not start its 4 member processes within 30s\n%s", errOut.String())
		}
		time.Sleep(20 * time.Millisecond) // polling /proc: no event to wait on
	}
}

// waitDead waits until none of pids runs.
func waitDead(t *testing.T, pids []int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for _, p := range pids {
		for alive(p) {
			if time.Now().After(deadline) {
				t.Fatalf("member process %d still runs %v after the bench ended", p, within)
			}
			time.Sleep(20 * time.Millisecond) // polling /proc: no event to wait on
		}
	}
}

// Interrupted (SIGINT), the bench stops its member processes, reaps them
// and deletes the group; killed (SIGKILL), its members die with it.
func TestBenchFleetInterruptedReapsMembers(t *testing.T) {
	u, prefix, raw := redisURL(t)
	cmd, members := startBenchBin(t, u)
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the interrupted bench did not exit within 30s")
	}
	if code := cmd.ProcessState.ExitCode(); code != exitInterrupted {
		t.Errorf("interrupted bench exited %d, want %d", code, exitInterrupted)
	}
	waitDead(t, members, time.Second)
	noKeys(t, raw, prefix)

	cmd, members = startBenchBin(t, u)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait() //nolint:errcheck // killed
	waitDead(t, members, 10*time.Second)
}

// The jobs scenario on SQLite runs its members as processes and counts
// their runs (how many keys run in the window, and how late, depends on
// the machine's load: the bench's figures, not asserted).
func TestBenchJobsProcessesSQLite(t *testing.T) {
	var out bytes.Buffer
	o := benchOpts{storeURL: "sqlite://" + filepath.Join(t.TempDir(), "jobs.db"), jsonOut: true, ttl: 2 * time.Second,
		steadyFor: time.Second, every: time.Second, partitions: 100, scenarios: []string{"jobs"}, memberExe: herdExe(t)}
	if err := runBench(t.Context(), &out, o); err != nil {
		t.Fatalf("bench: %v\n%s", err, out.String())
	}
	var r benchResult
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("bad JSON %q: %v", out.String(), err)
	}
	if !r.MemberProcesses || r.Jobs == nil || r.Jobs.KeysRun == 0 || r.Jobs.KeysRun > 100 || r.Jobs.Runs < r.Jobs.KeysRun ||
		r.Jobs.StoreOpsPerRun <= 0 || r.Jobs.CheckpointWritesPerRun <= 0 {
		t.Fatalf("jobs on member processes: %+v (%+v); want runs of some of the 100 keys, store operations and checkpoints counted", r, r.Jobs)
	}
	if ms := benchMembersOf(t, os.Getpid()); len(ms) > 0 {
		t.Errorf("member processes left after the bench: %v", ms)
	}
}

// --member-logs names a directory the bench makes if it is missing; one it
// cannot make is an error that names the flag (it used to leave a member
// that never started, and the bench panicked stopping it).
func TestBenchMemberLogsDir(t *testing.T) {
	dir := t.TempDir()
	logs := filepath.Join(dir, "a", "b")
	o := benchOpts{storeURL: "sqlite://" + filepath.Join(dir, "bench.db"), jsonOut: true, ttl: 3 * time.Second,
		partitions: 8, steadyFor: time.Second, scenarios: []string{"leave"}, memberExe: herdExe(t), memberLogs: logs}
	var out bytes.Buffer
	if err := runBench(t.Context(), &out, o); err != nil {
		t.Fatalf("bench with --member-logs %s: %v\n%s", logs, err, out.String())
	}
	if _, err := os.Stat(filepath.Join(logs, "m1.log")); err != nil {
		t.Errorf("member log: %v", err)
	}

	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	o.memberLogs = filepath.Join(file, "logs")
	err := runBench(t.Context(), &out, o)
	if err == nil || !strings.Contains(err.Error(), "--member-logs") {
		t.Errorf("bench with --member-logs under a file: %v; want an error naming --member-logs", err)
	}
	if ms := benchMembersOf(t, os.Getpid()); len(ms) > 0 {
		t.Errorf("member processes left after the bench: %v", ms)
	}
}
