package main

// herd run's flags, its checkpoint command, restarts and metrics.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/herdhq/herd/internal/checkpointsock"
	"github.com/herdhq/herd/internal/redistest"
)

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

// An @file gives weights as "ID<TAB>WEIGHT", which no id can confuse: ids
// hold ':' and '=' but never a tab. Keys have no weight.
func TestParsePartitionWeights(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return "@" + p
	}
	ps, err := parsePartitionSpec("SPEC", write("w", "city:westlafcals\t5\nk=v\t 2 \nplain\n a:b=c \t1000000\n"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range ps {
		got = append(got, fmt.Sprintf("%s=%d", p.ID, p.Weight))
	}
	if want := "city:westlafcals=5 k=v=2 plain=1 a:b=c=1000000"; strings.Join(got, " ") != want {
		t.Errorf("weights: %q; want %q", strings.Join(got, " "), want)
	}
	for text, msg := range map[string]string{
		"a\t0\n":       `partition "a": weight "0" is not a whole number from 1 to 1,000,000`,
		"a\tx\n":       `weight "x" is not a whole number`,
		"a\t1000001\n": `weight "1000001"`,
		"a\t2\na\t3\n": `"a" appears twice`,
	} {
		if _, err := parsePartitionSpec("SPEC", write("bad", text)); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: %v; want an error containing %q", text, err, msg)
		}
	}
	if _, err := parseIDSpec("--keys", "key", write("keys", "k1\t2\n")); err == nil || !strings.Contains(err.Error(), "a key has no weight") {
		t.Errorf("a key with a weight: %v", err)
	}
}
