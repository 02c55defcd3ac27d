package proctest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// runner is one running handler, per the children's events.
type runner struct {
	member string
	epoch  uint64
	start  int64 // the start event's T
}

// child is one member process.
type child struct {
	name   string
	cmd    *exec.Cmd
	stderr *tail
	// expectExit is set before the test kills or stops the child; an exit
	// without it is a failure.
	expectExit bool
	exited     chan struct{} // closed once stdout is drained and Wait returned
	exitAt     time.Time
	exitErr    error
}

// fleet runs the children of one subtest and keeps a model of who runs what.
type fleet struct {
	t          *testing.T
	group      string
	prefix     string
	partitions int
	ttl        time.Duration
	interval   time.Duration // between a handler's checkpoints
	url        string        // the store's, if all children share one
	env        []string      // more environment for the children

	wg sync.WaitGroup // stdout readers

	mu         sync.Mutex
	children   map[string]*child
	events     []event                      // every event, in receipt order
	running    map[string]map[string]runner // partition -> member -> runner
	lastChange time.Time                    // receipt of the last start or stop
	dead       map[string]int64             // member -> exit time (UnixNano)
	junk       []string                     // non-event stdout lines
}

func newFleet(t *testing.T, group, prefix string, partitions int, ttl time.Duration) *fleet {
	f := &fleet{
		t: t, group: group, prefix: prefix, partitions: partitions, ttl: ttl, interval: 50 * time.Millisecond,
		children: map[string]*child{},
		running:  map[string]map[string]runner{},
		dead:     map[string]int64{},
	}
	t.Cleanup(f.killAll)
	t.Cleanup(func() {
		if t.Failed() {
			f.dump()
			f.saveEvents()
		}
	})
	return f
}

// saveEvents writes every event, in receipt order, to the file named by
// HERD_PROCTEST_EVENTS (with the subtest's name appended), for diagnosis.
func (f *fleet) saveEvents() {
	base := os.Getenv("HERD_PROCTEST_EVENTS")
	if base == "" {
		return
	}
	name := base + "." + strings.ReplaceAll(f.t.Name(), "/", "_") + ".jsonl"
	var b strings.Builder
	for _, ev := range f.snapshotEvents() {
		fmt.Fprintf(&b, "{\"seq\":%d,\"recv\":%d,\"ev\":%q,\"member\":%q,\"partition\":%q,\"epoch\":%d,\"value\":%d,\"t\":%d,\"err\":%q}\n",
			ev.Seq, ev.Recv.UnixNano(), ev.Ev, ev.Member, ev.Partition, ev.Epoch, ev.Value, ev.T, ev.Err)
	}
	if err := os.WriteFile(name, []byte(b.String()), 0o644); err != nil {
		f.t.Logf("saving events: %v", err)
		return
	}
	f.t.Logf("events saved to %s", name)
}

// tail keeps the last bytes written to it.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

const tailSize = 16 << 10

func (b *tail) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > 2*tailSize {
		b.buf = append([]byte(nil), b.buf[len(b.buf)-tailSize:]...)
	}
	return len(p), nil
}

func (b *tail) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.buf
	if len(s) > tailSize {
		s = s[len(s)-tailSize:]
	}
	return string(s)
}

// start launches a child that joins the group through the store at url
// (redis://, sqlite:// or postgres://).
func (f *fleet) start(name, url string) {
	f.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestChild$", "-test.timeout=5m")
	cmd.Env = append(os.Environ(),
		envChild+"=1",
		envURL+"="+url,
		envPrefix+"="+f.prefix,
		envGroup+"="+f.group,
		envMember+"="+name,
		envPartitions+"="+strconv.Itoa(f.partitions),
		envTTL+"="+f.ttl.String(),
		envInterval+"="+f.interval.String(),
	)
	cmd.Env = append(cmd.Env, f.env...)
	c := &child{name: name, cmd: cmd, stderr: &tail{}, exited: make(chan struct{})}
	cmd.Stderr = c.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		f.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		f.t.Fatalf("starting child %s: %v", name, err)
	}
	f.mu.Lock()
	f.children[name] = c
	f.mu.Unlock()
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		f.read(c, stdout)
		err := cmd.Wait()
		f.mu.Lock()
		c.exitAt = time.Now()
		c.exitErr = err
		f.dead[name] = c.exitAt.UnixNano()
		for p, rs := range f.running {
			if _, ok := rs[name]; ok {
				delete(rs, name)
				f.lastChange = c.exitAt
			}
			if len(rs) == 0 {
				delete(f.running, p)
			}
		}
		f.mu.Unlock()
		close(c.exited)
	}()
}

func (f *fleet) read(c *child, r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var ev event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &ev) != nil || ev.Member != c.name {
			f.mu.Lock()
			if len(f.junk) < 100 {
				f.junk = append(f.junk, c.name+": "+string(line))
			}
			f.mu.Unlock()
			continue
		}
		f.record(ev)
	}
	_, _ = io.Copy(io.Discard, r)
}

func (f *fleet) record(ev event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ev.Seq = len(f.events)
	ev.Recv = time.Now()
	f.events = append(f.events, ev)
	switch ev.Ev {
	case "start":
		rs := f.running[ev.Partition]
		if rs == nil {
			rs = map[string]runner{}
			f.running[ev.Partition] = rs
		}
		rs[ev.Member] = runner{member: ev.Member, epoch: ev.Epoch, start: ev.T}
		f.lastChange = ev.Recv
	case "stop":
		if r, ok := f.running[ev.Partition][ev.Member]; ok && r.epoch == ev.Epoch {
			delete(f.running[ev.Partition], ev.Member)
			if len(f.running[ev.Partition]) == 0 {
				delete(f.running, ev.Partition)
			}
		}
		f.lastChange = ev.Recv
	}
}

// signal sends sig to a child. Kill and stop signals mark the exit as
// expected.
func (f *fleet) signal(name string, sig syscall.Signal) {
	f.t.Helper()
	f.mu.Lock()
	c := f.children[name]
	if sig == syscall.SIGKILL || sig == syscall.SIGTERM {
		c.expectExit = true
	}
	f.mu.Unlock()
	if err := c.cmd.Process.Signal(sig); err != nil {
		f.t.Fatalf("signal %v to %s: %v", sig, name, err)
	}
}

// locksOf lists the POSIX locks a child holds, as /proc/locks shows them
// (Linux; none elsewhere).
func (f *fleet) locksOf(name string) []string {
	f.mu.Lock()
	pid := f.children[name].cmd.Process.Pid
	f.mu.Unlock()
	b, _ := os.ReadFile("/proc/locks")
	var out []string
	for line := range strings.Lines(string(b)) {
		if fs := strings.Fields(line); len(fs) >= 5 && fs[4] == strconv.Itoa(pid) {
			out = append(out, strings.Join(fs[1:], " "))
		}
	}
	return out
}

// waitStopped waits until a child sent SIGSTOP is stopped (state T in
// /proc/PID/stat; Linux), so that what it holds no longer changes.
func (f *fleet) waitStopped(name string) {
	f.t.Helper()
	f.mu.Lock()
	pid := f.children[name].cmd.Process.Pid
	f.mu.Unlock()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return // not Linux, or gone
		}
		if fs := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:])); len(fs) > 0 && (fs[0] == "T" || fs[0] == "t") {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("%s not stopped within 5s of SIGSTOP", name)
		}
		time.Sleep(time.Millisecond)
	}
}

// isWriteLock reports whether a line of locksOf is a write (exclusive)
// lock.
func isWriteLock(line string) bool { return strings.Contains(" "+line+" ", " WRITE ") }

// waitExit waits for a child to exit.
func (f *fleet) waitExit(name string, d time.Duration) bool {
	f.mu.Lock()
	c := f.children[name]
	f.mu.Unlock()
	select {
	case <-c.exited:
		return true
	case <-time.After(d):
		return false
	}
}

// stopAll sends SIGTERM to every live child (they leave gracefully) and
// waits for them to exit.
func (f *fleet) stopAll() {
	f.t.Helper()
	f.mu.Lock()
	var live []*child
	for _, c := range f.children {
		select {
		case <-c.exited:
		default:
			c.expectExit = true
			live = append(live, c)
		}
	}
	f.mu.Unlock()
	for _, c := range live {
		_ = c.cmd.Process.Signal(syscall.SIGCONT)
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, c := range live {
		select {
		case <-c.exited:
			if c.exitErr != nil {
				f.t.Errorf("child %s exited with %v after SIGTERM; stderr:\n%s", c.name, c.exitErr, c.stderr.String())
			}
		case <-time.After(20 * time.Second):
			f.t.Errorf("child %s did not exit within 20s of SIGTERM; killing it; stderr:\n%s", c.name, c.stderr.String())
			_ = c.cmd.Process.Kill()
			<-c.exited
		}
	}
	f.wg.Wait()
}

// killAll is the cleanup: SIGKILL whatever still runs.
func (f *fleet) killAll() {
	f.mu.Lock()
	cs := make([]*child, 0, len(f.children))
	for _, c := range f.children {
		c.expectExit = true
		cs = append(cs, c)
	}
	f.mu.Unlock()
	for _, c := range cs {
		_ = c.cmd.Process.Kill()
	}
	for _, c := range cs {
		<-c.exited
	}
	f.wg.Wait()
}

// unexpectedExitLocked describes children that exited while they should run.
func (f *fleet) unexpectedExitLocked() string {
	var out []string
	for _, c := range f.children {
		select {
		case <-c.exited:
			if !c.expectExit {
				out = append(out, fmt.Sprintf("child %s exited unexpectedly (%v); stderr:\n%s", c.name, c.exitErr, c.stderr.String()))
			}
		default:
		}
	}
	return strings.Join(out, "\n")
}

// dump logs every child's stderr tail and stray stdout, for failures.
func (f *fleet) dump() {
	f.mu.Lock()
	defer f.mu.Unlock()
	names := make([]string, 0, len(f.children))
	for n := range f.children {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		f.t.Logf("---- stderr of %s (tail):\n%s", n, f.children[n].stderr.String())
	}
	if len(f.junk) > 0 {
		f.t.Logf("---- non-event stdout lines:\n%s", strings.Join(f.junk, "\n"))
	}
}
