package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/herdhq/herd/internal/checkpointsock"
	"github.com/herdhq/herd/internal/etcdtest"
	"github.com/herdhq/herd/internal/redistest"
)

var herdBin struct {
	once sync.Once
	dir  string
	err  error
}

// buildHerd builds the herd command once per test binary and returns the
// directory it is in (for PATH: children call herd checkpoint).
func buildHerd(t *testing.T) string {
	t.Helper()
	herdBin.once.Do(func() {
		dir, err := os.MkdirTemp("", "herd-bin-")
		if err != nil {
			herdBin.err = err
			return
		}
		out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "herd"), ".").CombinedOutput()
		if err != nil {
			herdBin.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
		herdBin.dir = dir
	})
	if herdBin.err != nil {
		t.Fatal(herdBin.err)
	}
	return herdBin.dir
}

func TestMain(m *testing.M) {
	code := m.Run()
	etcdtest.Stop()
	if herdBin.dir != "" {
		os.RemoveAll(herdBin.dir)
	}
	os.Exit(code)
}

// member is one herd run process of a test.
type member struct {
	name string
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
	err  error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startRun starts herd run with args, killed when the test ends.
func startRun(t *testing.T, name string, env []string, args ...string) *member {
	t.Helper()
	return startHerdIn(t, name, "", env, append([]string{"run"}, args...)...)
}

// startRunIn is startRun in the working directory dir ("": the test's).
func startRunIn(t *testing.T, name, dir string, env []string, args ...string) *member {
	t.Helper()
	return startHerdIn(t, name, dir, env, append([]string{"run"}, args...)...)
}

// startHerd starts herd with args, killed when the test ends.
func startHerd(t *testing.T, name string, env []string, args ...string) *member {
	t.Helper()
	return startHerdIn(t, name, "", env, args...)
}

// startHerdIn is startHerd in the working directory dir ("": the test's).
func startHerdIn(t *testing.T, name, dir string, env []string, args ...string) *member {
	t.Helper()
	bin := buildHerd(t)
	m := &member{name: name, out: &syncBuffer{}, done: make(chan struct{})}
	m.cmd = exec.Command(filepath.Join(bin, "herd"), args...)
	m.cmd.Dir = dir
	m.cmd.Env = append(append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH")), env...)
	m.cmd.Stdout, m.cmd.Stderr = m.out, m.out
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { m.err = m.cmd.Wait(); close(m.done) }()
	t.Cleanup(func() {
		_ = m.cmd.Process.Kill()
		<-m.done
		if t.Failed() {
			t.Logf("output of %s:\n%s", name, m.out.String())
		}
	})
	return m
}

// wait waits for the member to exit, at most d.
func (m *member) wait(t *testing.T, d time.Duration) error {
	t.Helper()
	select {
	case <-m.done:
		return m.err
	case <-time.After(d):
		t.Fatalf("%s did not exit within %v", m.name, d)
	}
	return nil
}

// eventually polls cond every 10ms until it holds, failing after d.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > d {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}

// groupAlive lists the live (not zombie) processes of process group pgid.
func groupAlive(pgid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if g, _ := strconv.Atoi(f[2]); g == pgid {
			out = append(out, pid)
		}
	}
	return out
}

// The child of the end-to-end test. It holds an exclusive lock on a file of
// its partition for as long as any process of its group lives (the lock's
// descriptor is inherited by everything it starts), so a second live child
// of one partition, on any member, finds the lock taken and says so.
const e2eChild = `
exec 9>"$RUN_DIR/lock.$HERD_PARTITION"
if ! flock -n 9; then echo "overlap $HERD_PARTITION $HERD_MEMBER $$" >> "$RUN_LOG"; exit 1; fi
n=${HERD_CHECKPOINT:-0}
pg=$(cut -d' ' -f5 /proc/$$/stat)
echo "start $HERD_PARTITION $HERD_MEMBER $$ $pg $n" >> "$RUN_LOG"
trap 'echo "stop $HERD_PARTITION $HERD_MEMBER $$" >> "$RUN_LOG"; exit 0' TERM
while :; do
  n=$((n+1))
  herd checkpoint "$n"; rc=$?
  if [ $rc = 0 ]; then echo "saved $HERD_PARTITION $n" >> "$RUN_LOG"
  elif [ $rc = 3 ]; then echo "fenced $HERD_PARTITION $n" >> "$RUN_LOG"; exit 0
  fi
  sleep 0.05 & wait $!
done
`

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
	testRunE2EKill(t, t.TempDir(), []string{"--store", u})
}

// The same with no --store, in a fresh directory: the members meet in the
// default store, the SQLite file herd.db there.
func TestRunE2EKillSQLite(t *testing.T) {
	dir := t.TempDir()
	testRunE2EKill(t, dir, nil, "HERD_STORE=")
	if _, err := os.Stat(filepath.Join(dir, "herd.db")); err != nil {
		t.Errorf("no herd.db in the working directory of herd run without --store: %v", err)
	}
}

// testRunE2EKill runs three members in dir with storeArgs (and env).
func testRunE2EKill(t *testing.T, dir string, storeArgs []string, env ...string) {
	buildHerd(t)
	script := filepath.Join(dir, "child.sh")
	if err := os.WriteFile(script, []byte(e2eChild), 0o644); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "log")
	env = append(env, "RUN_LOG="+logPath, "RUN_DIR="+dir)
	const ttl = 2 * time.Second
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
		members[name] = startRunIn(t, name, dir, env, append(args, "--", "/bin/sh", script)...)
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
	killT := time.Now()
	if err := members["m2"].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, ttl+time.Second-time.Since(killT), "the killed member's partitions running elsewhere", func() bool {
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

	evs := readEvents(t, logPath)
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
		if ev.member != "m2" && !stopped[ev.pid] {
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

// Every flag of run and checkpoint is checked before anything runs.
func TestRunRejects(t *testing.T) {
	dir := t.TempDir()
	dup := filepath.Join(dir, "dup")
	if err := os.WriteFile(dup, []byte("a\n# comment\n\n b \na\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := func(extra ...string) []string {
		return append([]string{"run", "--store", "mem://", "--group", "g"}, extra...)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--store", "mem://", "--", "true"}, `required flag(s) "group" not set`},
		{r(), "requires at least 1 arg(s)"},
		{r("--", ""), "no command"},
		{r("--ttl", "5ms", "--", "true"), "--ttl must be between 10ms and 1h0m0s (got 5ms)"},
		{r("--max-shutdown", "-1s", "--", "true"), "--max-shutdown must be between 0s and 1h0m0s (got -1s)"},
		{r("--restart-delay", "0", "--", "true"), "--restart-delay must be between 1ms and 1h0m0s (got 0s)"},
		{r("--restart-delay", "2s", "--restart-max", "1s", "--", "true"), "--restart-max must be between 2s and 24h0m0s (got 1s)"},
		{r("--max-failures", "-1", "--", "true"), "--max-failures must be between 0 (never give back) and 1000000 (got -1)"},
		{r("--member", "a\tb", "--", "true"), "--member: member id"},
		{r("--partitions", "5-3", "--", "true"), `range "5-3" ends before it starts`},
		{r("--partitions", "0-200000", "--", "true"), "more than 100,000 partitions"},
		{r("--partitions", "0-3,2", "--", "true"), `"2" appears twice`},
		{r("--partitions", "a,,b", "--", "true"), "partition id is empty"},
		{r("--partitions", "@"+filepath.Join(dir, "missing"), "--", "true"), "no such file"},
		{r("--partitions", "@"+dup, "--", "true"), `"a" appears twice`},
		{[]string{"run", "--store", "ftp://x", "--group", "g", "--", "true"}, `--store: unknown scheme "ftp"`},
		{r("--", "true"), "--store mem:// is this process's own store: every herd run would have a store of its own"},
		{[]string{"checkpoint"}, "accepts 1 arg(s), received 0"},
		{[]string{"checkpoint", "--base64", "!!"}, "VALUE is not standard base64"},
		{[]string{"checkpoint", "--timeout", "1ms", "x"}, "--timeout must be between 100ms and 10m0s"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, err := execute(t, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("herd %q: error %v; want one containing %q (output %q)", tc.args, err, tc.want, out)
			}
		})
	}
}

func TestCheckpointOutsideRun(t *testing.T) {
	t.Setenv("HERD_SOCKET", "")
	if _, err := execute(t, "checkpoint", "5"); err == nil || !strings.Contains(err.Error(), "runs inside a child of herd run") {
		t.Fatalf("checkpoint outside herd run: %v", err)
	}
}

func TestParsePartitions(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "ids")
	if err := os.WriteFile(file, []byte("city:paris\r\n# skipped\n\n  city of x  \n7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for spec, want := range map[string]string{
		"0-3":          "0 1 2 3",
		"a,b,c":        "a b c",
		"0-1,x,5-5,y":  "0 1 x 5 y",
		"eu-west,01-2": "eu-west 01-2",
		"@" + file:     "city:paris|city of x|7",
	} {
		ps, err := parsePartitions(spec)
		if err != nil {
			t.Fatalf("%q: %v", spec, err)
		}
		var ids []string
		for _, p := range ps {
			ids = append(ids, p.ID)
		}
		sep := " "
		if strings.HasPrefix(spec, "@") {
			sep = "|"
		}
		if got := strings.Join(ids, sep); got != want {
			t.Errorf("%q: %q; want %q", spec, got, want)
		}
	}
}

// herd checkpoint's exit status says saved (0), fenced (3) or error (1).
func TestCheckpointExitStatus(t *testing.T) {
	bin := filepath.Join(buildHerd(t), "herd")
	var mu sync.Mutex
	var got []byte
	srv, err := checkpointsock.Listen(func(_ context.Context, part string, epoch uint64, v []byte) checkpointsock.Reply {
		switch epoch {
		case 1:
			mu.Lock()
			got = v
			mu.Unlock()
			return checkpointsock.Reply{}
		case 2:
			return checkpointsock.Reply{Fenced: true, Current: 9}
		}
		return checkpointsock.Reply{Err: errors.New("store unreachable")}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, tc := range []struct {
		epoch string
		args  []string
		code  int
		out   string
	}{
		{"1", []string{"--base64", "AAEC"}, 0, ""},
		{"2", []string{"7"}, 3, `herd: checkpoint of partition "p 1" at epoch 2 fenced: the partition has moved on (current epoch 9); nothing saved`},
		{"3", []string{"7"}, 1, "herd: checkpoint: not saved: store unreachable"},
	} {
		cmd := exec.Command(bin, append([]string{"checkpoint"}, tc.args...)...)
		cmd.Env = append(os.Environ(), "HERD_SOCKET="+srv.Path(), "HERD_PARTITION=p 1", "HERD_EPOCH="+tc.epoch)
		out, err := cmd.CombinedOutput()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != tc.code || strings.TrimSpace(string(out)) != tc.out {
			t.Errorf("epoch %s: exit %d, output %q; want %d, %q", tc.epoch, code, out, tc.code, tc.out)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if string(got) != "\x00\x01\x02" {
		t.Errorf("saved %q; want the decoded base64", got)
	}
}

// When the store goes away, the member fences itself on its own clock and
// kills its child (which ignores SIGTERM, with a long --max-shutdown)
// before the store could have expired the session: within TTL of the
// moment the store went away.
func TestRunKillsChildWhenSessionCannotBeRenewed(t *testing.T) {
	srv := redistest.StartServer(t)
	const ttl = 2 * time.Second
	m := startRun(t, "m", nil, "--store", srv.URL(), "--group", "g", "--partitions", "0", "--ttl", ttl.String(),
		"--max-shutdown", "1m",
		"--", "sh", "-c", stubbornChild)
	pgid := readyGroup(t, m)
	srv.Kill()
	gone := eventually(t, 2*ttl, "the child's group killed", func() bool { return len(groupAlive(pgid)) == 0 })
	if gone >= ttl {
		t.Errorf("child killed %v after the store went away; want before the TTL %v", gone, ttl)
	}
	t.Logf("child killed %v after the store went away (TTL %v)", gone.Round(time.Millisecond), ttl)
	if !strings.Contains(m.out.String(), "session lost: killing the child now") {
		t.Errorf("no word of the kill in the output:\n%s", m.out.String())
	}
}

// A child that exits on its own is started again, with a pause that grows
// with the exits in a row (up to --restart-max), each exit logged with its
// status and count.
func TestRunRestartsFailingChild(t *testing.T) {
	m := startRun(t, "m", nil, "--store", "sqlite://"+filepath.Join(t.TempDir(), "herd.db"), "--group", "g", "--partitions", "p",
		"--restart-delay", "20ms", "--restart-max", "160ms", "--max-failures", "0", "--", "sh", "-c", "echo started; exit 7")
	eventually(t, 30*time.Second, "five exits in a row", func() bool {
		return strings.Contains(m.out.String(), "exits_in_a_row=5")
	})
	if err := m.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := m.wait(t, 30*time.Second); err != nil {
		t.Errorf("herd run: %v; want a clean exit", err)
	}
	out := m.out.String()
	if n := strings.Count(out, "[p] started"); n < 5 {
		t.Errorf("%d starts; want at least 5", n)
	}
	// The pauses: 20ms doubled per exit up to 160ms, less up to half.
	for i, want := range []struct{ lo, hi time.Duration }{{10, 20}, {20, 40}, {40, 80}, {80, 160}, {80, 160}} {
		re := fmt.Sprintf(`exits_in_a_row=%d after=`, i+1)
		_, rest, ok := strings.Cut(out, re)
		if !ok {
			t.Fatalf("no %q in the output:\n%s", re, out)
		}
		d, err := time.ParseDuration(strings.Fields(rest)[0])
		if err != nil || d < want.lo*time.Millisecond || d > want.hi*time.Millisecond {
			t.Errorf("pause after exit %d: %v (%v); want %vms to %vms", i+1, d, err, want.lo, want.hi)
		}
	}
	if !strings.Contains(out, `how="exit status 7"`) {
		t.Errorf("exit status not logged:\n%s", out)
	}
}

// freeLoopbackAddr returns a loopback address with a port free a moment ago.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// checkRunMetrics fetches a herd run member's /metrics and /healthz and
// checks that the metrics the issue lists are there and that it is healthy.
func checkRunMetrics(t *testing.T, addr string) {
	t.Helper()
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		return resp.StatusCode, string(b)
	}
	if code, body := get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d %q; want 200 while the session is live", code, body)
	}
	_, body := get("/metrics")
	for _, name := range []string{
		`herd_partitions_owned{group="e2e",member="m1"} 2`,
		"herd_claims_total", "herd_handoffs_total", "herd_losses_total",
		"herd_fencing_rejections_total", "herd_session_renewals_total",
		"herd_session_renewal_duration_seconds", "herd_store_errors_total",
		"herd_rebalance_duration_seconds",
	} {
		if !strings.Contains(body, name) {
			t.Errorf("/metrics lacks %q", name)
		}
	}
}

// stubbornChild ignores SIGTERM and prints "ready PGID" once running.
const stubbornChild = `trap '' TERM; echo "ready $(cut -d' ' -f5 /proc/$$/stat)"; while :; do sleep 0.05; done`

// readyGroup waits until partition 0's child of m printed "ready PGID" and
// returns its process group.
func readyGroup(t *testing.T, m *member) int {
	t.Helper()
	var pgid int
	eventually(t, 30*time.Second, "the child running", func() bool {
		for line := range strings.Lines(m.out.String()) {
			if g, ok := strings.CutPrefix(strings.TrimSpace(line), "[0] ready "); ok {
				pgid, _ = strconv.Atoi(g)
				return true
			}
		}
		return false
	})
	return pgid
}
