package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/store"
)

// benchFleet is what a bench scenario drives: members in this process (cluster,
// for mem://) or in processes of their own (procFleet, for every store
// processes can share).
type benchFleet interface {
	setup(ctx context.Context) error
	partitionCount() int
	live() []string
	join(n int) ([]string, error)
	leave(id string) error
	crash(id string) error
	measure(ctx context.Context, timeout time.Duration, change func() error) (step, error)
	watchServerCPU(ctx context.Context) (closeFn func())
	steady(ctx context.Context, settle, window time.Duration) (steadyFigures, error)
	close() error
}

// procFleet runs each member of one group as a process of its own: herd
// re-executed as herd __bench-member. It starts them, kills them with
// SIGKILL (a crash) or SIGTERM (a graceful leave, as a deployment stops a
// process), and measures them from outside: their reports on stdout, the
// store, and /proc.
type procFleet struct {
	exe      string // the herd binary
	storeURL string
	group    string
	parts    int
	ttl      time.Duration
	joinWith bool // members join with the partition set (setup stores none)
	connect  func(ctx context.Context) (store.Store, error)
	progress io.Writer // progress lines (nil: none)

	mu       sync.Mutex
	all      []*memberProc // every member started, by index
	led      *ledger
	rowsSeen time.Time     // when a report last said rows were read
	poke     chan struct{} // a report arrived (buffered 1)
	failures int           // members that failed to join, this step
	touched  bool          // the store was reached: close deletes the group
	// args, if set, are more arguments for the member of that index; onRuns,
	// if set, receives a jobs member's runs.
	args func(idx int) []string
	// tie: each member's --tie-session ("": the member's default, off).
	tie string
	// profileDir: each member process writes its CPU profile there ("": none).
	profileDir string
	// logDir: each member process logs at info to DIR/MEMBER.log ("": its
	// errors only, kept for the bench's own error messages).
	logDir string
	onRuns func(rs []jobRun)
	// serverCPU reads the store server's CPU time (nil: not measured).
	serverCPU func(context.Context) (time.Duration, error)
}

// memberProc is one member process.
type memberProc struct {
	idx    int32
	id     string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *tailBuffer
	joined chan error    // one value: nil once joined, or why not
	exited chan struct{} // closed once reaped

	// Under the fleet's lock:
	counts   memberCounts
	gone     bool    // killed, told to leave, or failed: not live
	killedAt int64   // Unix ns of its SIGKILL (0: none)
	cpu      float64 // CPU seconds when reaped
	peakRSS  uint64  // bytes, when reaped
	reaped   bool
	failed   error
}

func newProcFleet(exe, storeURL, group string, parts int, ttl time.Duration, joinWith bool,
	connect func(context.Context) (store.Store, error), progress io.Writer) *procFleet {
	return &procFleet{exe: exe, storeURL: storeURL, group: group, parts: parts, ttl: ttl, joinWith: joinWith,
		connect: connect, progress: progress, led: newLedger(parts), poke: make(chan struct{}, 1)}
}

func (f *procFleet) partitionCount() int { return f.parts }

// setup writes the partition set, unless the members join with it.
func (f *procFleet) setup(ctx context.Context) error {
	st, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	f.touched = true
	if f.joinWith {
		return nil
	}
	_, err = st.SetPartitions(ctx, f.group, store.PartitionSet{Partitions: herd.Numbered(f.parts)})
	return err
}

// live lists the members that joined and were not stopped, in start order.
func (f *procFleet) live() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []string
	for _, m := range f.liveLocked() {
		ids = append(ids, f.all[m].id)
	}
	return ids
}

func (f *procFleet) liveLocked() []int32 {
	var out []int32
	for _, m := range f.all {
		if !m.gone {
			out = append(out, m.idx)
		}
	}
	return out
}

func (f *procFleet) byID(id string) *memberProc {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range f.all {
		if m.id == id && !m.gone {
			return m
		}
	}
	return nil
}

// memberJoinTimeout bounds how long join waits for a started process to
// report that it joined.
func (f *procFleet) memberJoinTimeout() time.Duration {
	return f.ttl + 60*time.Second + fleetAllowance(f.parts, len(f.all))
}

// fleetAllowance is the time a change of a fleet of members on parts
// partitions is given beyond its base, the more the larger both are: on a
// loaded 2-core machine, 100 member processes placing 100,000 partitions
// took more than 75 s (the allowance before, which in-process members
// needed).
func fleetAllowance(parts, members int) time.Duration {
	return balanceAllowance(parts) + time.Duration(parts)*time.Duration(max(members, 1))*10*time.Microsecond
}

// leaveGrace is how long a member process is given to leave after SIGTERM
// before it is killed; the member gives its Leave memberLeaveMargin less.
func (f *procFleet) leaveGrace() time.Duration {
	return 2*leaveTimeout + balanceAllowance(f.parts)
}

const memberLeaveMargin = 2 * time.Second

// join starts n member processes at once and waits until each joined or
// failed. Members that failed are counted (step.JoinFailures) and left
// out; join fails only if none joined.
func (f *procFleet) join(n int) ([]string, error) {
	var started []*memberProc
	for range n {
		m, err := f.start()
		if err != nil {
			f.stopAll(started)
			return nil, err
		}
		started = append(started, m)
	}
	deadline := time.NewTimer(f.memberJoinTimeout())
	defer deadline.Stop()
	var ids []string
	var firstErr error
	for _, m := range started {
		var err error
		select {
		case err = <-m.joined:
		case <-deadline.C:
			err = fmt.Errorf("not joined within %v", f.memberJoinTimeout())
		}
		if err != nil {
			f.mu.Lock()
			m.gone, m.failed = true, err
			f.failures++
			f.mu.Unlock()
			m.cmd.Process.Kill() //nolint:errcheck // it may have exited
			if firstErr == nil {
				firstErr = fmt.Errorf("member %s: %w%s", m.id, err, m.stderr.suffix())
			}
			continue
		}
		ids = append(ids, m.id)
	}
	f.logf("%d of %d member processes joined", len(ids), n)
	if len(ids) == 0 {
		return nil, firstErr
	}
	return ids, nil
}

// start starts one member process and the goroutine that reads its reports.
func (f *procFleet) start() (*memberProc, error) {
	f.mu.Lock()
	m := &memberProc{idx: int32(len(f.all)), joined: make(chan error, 1), exited: make(chan struct{}), stderr: &tailBuffer{}}
	m.id = "m" + strconv.Itoa(len(f.all)+1)
	f.all = append(f.all, m)
	f.led.member(m.idx)
	f.mu.Unlock()
	args := []string{"__bench-member", "--store", f.storeURL, "--group", f.group, "--member", m.id, "--ttl", f.ttl.String(),
		"--leave-timeout", (f.leaveGrace() - memberLeaveMargin).String()}
	if f.joinWith {
		args = append(args, "--join-with", strconv.Itoa(f.parts))
	}
	if f.tie != "" {
		args = append(args, "--tie-session", f.tie)
	}
	if f.args != nil {
		args = append(args, f.args(int(m.idx))...)
	}
	if f.profileDir != "" {
		args = append(args, "--cpuprofile", filepath.Join(f.profileDir, m.id+".pprof"))
	}
	m.cmd = exec.Command(f.exe, args...)
	m.cmd.Env = append(os.Environ(), "HERD_LOG_LEVEL=error")
	m.cmd.Stderr = m.stderr
	if f.logDir != "" {
		logFile, err := os.Create(filepath.Join(f.logDir, m.id+".log"))
		if err != nil {
			f.mu.Lock()
			m.gone, m.reaped = true, true // never started: nothing to stop or reap
			f.mu.Unlock()
			close(m.exited)
			return nil, fmt.Errorf("--member-logs: %w", err)
		}
		defer logFile.Close() // the child has its own copy once started
		m.cmd.Env = append(os.Environ(), "HERD_LOG_LEVEL=info")
		m.cmd.Stderr = logFile // the bench's error messages then say less: the log says it all
	}
	memberProcAttr(m.cmd)
	out, err := f.startProc(m)
	if err != nil {
		f.mu.Lock()
		m.gone, m.reaped = true, true // never started: nothing to stop or reap
		f.mu.Unlock()
		close(m.exited)
		return nil, err
	}
	go f.read(m, out)
	return m, nil
}

// startProc opens m's pipes and starts its process.
func (f *procFleet) startProc(m *memberProc) (io.Reader, error) {
	var err error
	if m.stdin, err = m.cmd.StdinPipe(); err != nil {
		return nil, fmt.Errorf("starting member %s: %w", m.id, err)
	}
	out, err := m.cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("starting member %s: %w", m.id, err)
	}
	if err := m.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting member %s (%s): %w", m.id, f.exe, err)
	}
	if err := lowerPriority(m.cmd.Process.Pid); err != nil && !errors.Is(err, syscall.ESRCH) {
		// ESRCH: it exited already, which the bench reports.
		_ = m.cmd.Process.Kill()
		_ = m.cmd.Wait()
		return nil, fmt.Errorf("starting member %s: lowering its priority: %w", m.id, err)
	}
	return out, nil
}

// read applies a member's reports until its stdout ends, then reaps it.
func (f *procFleet) read(m *memberProc, out io.Reader) {
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 0, 64<<10), 256<<20)
	for sc.Scan() {
		var r memberReport
		if json.Unmarshal(sc.Bytes(), &r) != nil {
			continue
		}
		f.report(m, r)
	}
	io.Copy(io.Discard, out) //nolint:errcheck // drain whatever is left
	err := m.cmd.Wait()
	cpu, rss := exitedUsage(m.cmd.ProcessState)
	f.mu.Lock()
	m.gone, m.reaped, m.cpu, m.peakRSS = true, true, cpu, rss
	// A killed member reports nothing more: its handlers stopped when it
	// was killed. One that ended by itself stopped them by the time it
	// exited (a graceful leave reported each stop already).
	at := m.killedAt
	if at == 0 {
		at = time.Now().UnixNano()
	}
	f.led.drop(m.idx, at)
	f.mu.Unlock()
	select {
	case m.joined <- fmt.Errorf("exited before it joined: %v", err):
	default:
	}
	close(m.exited)
	f.wake()
}

func (f *procFleet) report(m *memberProc, r memberReport) {
	switch r.Event {
	case "joined":
		select {
		case m.joined <- nil:
		default:
		}
	case "error":
		select {
		case m.joined <- errors.New(r.Error):
		default:
		}
	case "runs":
		if f.onRuns != nil {
			f.onRuns(r.Runs)
		}
	case "own":
		f.mu.Lock()
		for i, p := range r.Own {
			if i >= len(r.OwnT) {
				break
			}
			if p >= 0 {
				f.led.apply(m.idx, p, true, r.At0+r.OwnT[i]*1000)
			} else {
				f.led.apply(m.idx, -p-1, false, r.At0+r.OwnT[i]*1000)
			}
		}
		f.mu.Unlock()
	}
	if r.Counts != nil {
		f.mu.Lock()
		if r.Counts.Rows != m.counts.Rows {
			f.rowsSeen = time.Now()
		}
		m.counts = *r.Counts
		f.mu.Unlock()
	}
	f.wake()
}

func (f *procFleet) wake() {
	select {
	case f.poke <- struct{}{}:
	default:
	}
}

func (f *procFleet) logf(format string, args ...any) {
	if f.progress != nil {
		fmt.Fprintf(f.progress, "bench: "+format+"\n", args...)
	}
}
