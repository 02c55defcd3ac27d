package child

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as the shim (CHILD_TEST_SHIM) and as a parent
// that starts a child and waits to be killed (CHILD_TEST_PARENT).
func TestMain(m *testing.M) {
	switch {
	case os.Getenv("CHILD_TEST_SHIM") == "1":
		os.Exit(ShimMain(os.Args[1:]))
	case os.Getenv("CHILD_TEST_PARENT") == "1":
		p, err := Start(Spec{Shim: shim(), Args: []string{"sh", "-c", os.Getenv("CHILD_TEST_SCRIPT")}, Env: env(), Stdout: os.Stdout})
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println("group", p.Pid())
		<-p.Done()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func shim() []string { return []string{os.Args[0]} }

func env() []string { return append(os.Environ(), "CHILD_TEST_SHIM=1", "CHILD_TEST_PARENT=") }

// groupAlive lists the processes of group pgid that have not exited
// (zombies waiting for a reaper count as exited).
func groupAlive(t *testing.T, pgid int) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // exited meanwhile
		}
		i := bytes.LastIndexByte(b, ')')
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if g, _ := strconv.Atoi(f[2]); g == pgid {
			out = append(out, pid)
		}
	}
	return out
}

// killedWithin bounds how long a process sent SIGKILL before Done may still
// show in /proc: the signal cannot be blocked, but the process dies only once
// the kernel schedules it, which on a loaded machine is not instant.
const killedWithin = 2 * time.Second

// waitGroupGone fails the test unless group pgid has no live process
// within d.
func waitGroupGone(t *testing.T, pgid int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		left := groupAlive(t, pgid)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes %v of group %d still alive after %v", left, pgid, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// lines collects a child's output lines, never blocking the child.
type lines struct {
	mu  sync.Mutex
	buf []byte
	ch  chan string
}

func (l *lines) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, b...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		select {
		case l.ch <- string(l.buf[:i]):
		default: // the test is not interested in this much output
		}
		l.buf = l.buf[i+1:]
	}
}

// start runs script under sh and returns the process and its output lines.
func start(t *testing.T, script string) (*Process, *lines) {
	t.Helper()
	out := &lines{ch: make(chan string, 100)}
	p, err := Start(Spec{Shim: shim(), Args: []string{"sh", "-c", script}, Env: env(), Stdout: out, Stderr: out})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(0) })
	return p, out
}

func expectLine(t *testing.T, out *lines, want string) string {
	t.Helper()
	select {
	case got := <-out.ch:
		if want != "" && got != want {
			t.Fatalf("output %q; want %q", got, want)
		}
		return got
	case <-time.After(10 * time.Second):
		t.Fatalf("no output line after 10s; want %q", want)
	}
	return ""
}

func TestStopGraceful(t *testing.T) {
	p, out := start(t, `trap 'echo bye; exit 0' TERM; echo ready; while :; do sleep 0.05; done`)
	expectLine(t, out, "ready")
	if killed := p.Stop(time.Minute); killed {
		t.Fatalf("SIGKILL needed for a child that exits on SIGTERM (%s)", p.Describe())
	}
	// The shell may first report its sleep killed by the group's SIGTERM.
	for got := expectLine(t, out, ""); got != "bye"; got = expectLine(t, out, "") {
		if got != "Terminated" {
			t.Fatalf("output %q; want bye", got)
		}
	}
	if code, sig := p.Status(); code != 0 || sig != 0 {
		t.Fatalf("status %s; want exit status 0", p.Describe())
	}
	waitGroupGone(t, p.Pid(), killedWithin)
}

// A child that ignores SIGTERM is killed, with its whole group, once the
// grace time has passed, and not before.
func TestStopTermIgnored(t *testing.T) {
	p, out := start(t, `trap '' TERM; sleep 1000 & echo ready; while :; do sleep 0.05; done`)
	expectLine(t, out, "ready")
	const grace = 300 * time.Millisecond
	began := time.Now()
	if killed := p.Stop(grace); !killed {
		t.Fatalf("child ignoring SIGTERM stopped without SIGKILL (%s)", p.Describe())
	}
	if took := time.Since(began); took < grace {
		t.Fatalf("killed after %v; want the whole grace time %v first", took, grace)
	}
	if _, sig := p.Status(); sig != syscall.SIGKILL {
		t.Fatalf("status %s; want killed by SIGKILL", p.Describe())
	}
	waitGroupGone(t, p.Pid(), killedWithin)
}

// When the command exits on its own, the processes it left in its group
// (a background job) are killed before Done.
func TestBackgroundJobKilledOnExit(t *testing.T) {
	p, out := start(t, `sleep 1000 & echo $!; exit 3`)
	expectLine(t, out, "")
	<-p.Done()
	if code, _ := p.Status(); code != 3 {
		t.Fatalf("status %s; want exit status 3", p.Describe())
	}
	waitGroupGone(t, p.Pid(), killedWithin)
}

func TestStatusSignal(t *testing.T) {
	p, _ := start(t, `kill -9 $$`)
	<-p.Done()
	if _, sig := p.Status(); sig != syscall.SIGKILL {
		t.Fatalf("status %s; want killed by SIGKILL", p.Describe())
	}
}

// Killing the parent with SIGKILL kills the child and everything in its
// group: nothing outlives the parent.
func TestParentKilled(t *testing.T) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "CHILD_TEST_PARENT=1", "CHILD_TEST_SCRIPT=sleep 1000 & sleep 1000 & echo started; wait")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(out)
	var pgid int
	for pgid == 0 || !strings.Contains(sc.Text(), "started") {
		if !sc.Scan() {
			t.Fatalf("parent ended early: %v", sc.Err())
		}
		if g, ok := strings.CutPrefix(sc.Text(), "group "); ok {
			pgid, _ = strconv.Atoi(g)
		}
	}
	if n := len(groupAlive(t, pgid)); n < 3 {
		t.Fatalf("%d processes in the child's group; want the shim, sh and two sleeps", n)
	}
	at := time.Now()
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	waitGroupGone(t, pgid, 5*time.Second)
	// What a tied session's grace must cover for herd run (docs/takeover.md).
	t.Logf("the child's group was gone %v after kill -9 of its parent (seen by a scan of /proc every 10ms)", time.Since(at).Round(time.Millisecond))
}

func TestLines(t *testing.T) {
	var out bytes.Buffer
	var mu sync.Mutex
	l := NewLines(&out, &mu, "[7] ")
	io.WriteString(l, "a\nb")
	io.WriteString(l, "c\n\nd")
	l.Flush()
	long := strings.Repeat("x", MaxLine+5)
	io.WriteString(l, long+"\n")
	want := "[7] a\n[7] bc\n[7] \n[7] d\n[7] " + strings.Repeat("x", MaxLine) + "\n[7] xxxxx\n"
	if out.String() != want {
		t.Fatalf("got %q...; want %q...", trunc(out.String()), trunc(want))
	}
}

func trunc(s string) string {
	if len(s) > 60 {
		return s[:30] + "..." + s[len(s)-30:]
	}
	return s
}
