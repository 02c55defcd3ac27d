package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herdhq/herd/internal/syncbuf"

	"github.com/herdhq/herd/internal/etcdtest"
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

// syncBuffer is a log destination tests read while the code writes.
type syncBuffer = syncbuf.Buffer

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
	// A member killed by a test leaves its checkpoint socket's directory in
	// TMPDIR: a short one of the test's own, removed when the test ends.
	tmp, err := os.MkdirTemp("", "hrt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(tmp) })
	m.cmd.Env = append(append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "TMPDIR="+tmp), env...)
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
