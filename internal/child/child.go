// Package child runs the child processes of herd run: one process group per
// child, stopped with SIGTERM to the whole group and SIGKILL after a grace
// time, and never outliving the process that started it, even when that
// process is killed with SIGKILL (Linux only).
//
// How a child cannot outlive its parent. Each child is started through a
// shim: a copy of the parent's own executable, run as the leader of a new
// process group, with a parent-death signal (PR_SET_PDEATHSIG). The shim
// starts the real command in its group and waits for it. The pieces:
//
//   - The parent's death, however it happens (SIGKILL included), makes the
//     kernel send the shim the death signal; the shim then sends SIGKILL to
//     its whole group: the command and everything it started that stayed
//     in the group (a shell's pipelines and background jobs).
//   - The parent-death signal is sent when the thread that started the
//     process exits, not the process (see syscall.SysProcAttr.Pdeathsig).
//     Go may end an OS thread under a goroutine, so the process is started
//     and waited for by one goroutine locked to its thread
//     (runtime.LockOSThread) for the child's whole life.
//   - When the command exits on its own, members of its group may live on
//     (a background job). The parent waits for the shim to exit without
//     reaping it (waitid with WNOWAIT), so its pid, which is the group's id,
//     cannot be reused; then it kills what is left of the group, then reaps
//     the shim. Signalling the group is therefore never aimed at someone
//     else's processes.
//
// A process that leaves the group on purpose (setsid, setpgid: a daemon)
// escapes all of this, as it escapes a terminal's job control.
package child

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// deathSignal is what the kernel sends the shim when its parent's thread
// exits. It is sent to the shim alone (not to its group) and is not one the
// parent ever sends the group (SIGTERM, SIGKILL).
const deathSignal = syscall.SIGUSR2

// Spec describes one child.
type Spec struct {
	// Shim is the command line that runs ShimMain, without the child's
	// command: typically the executable itself and a hidden subcommand.
	Shim []string
	// Args is the child's command and its arguments.
	Args []string
	// Env is the child's whole environment.
	Env []string
	// Stdout and Stderr receive the child's output (nil: discarded). The
	// group's processes hold the pipes; they are read until every process of
	// the group has exited.
	Stdout, Stderr io.Writer
}

// Process is a running child.
type Process struct {
	pid   int // the shim's pid, which is the group's id
	done  chan struct{}
	state *os.ProcessState // set before done is closed
	err   error            // likewise: why waiting failed, if it did
}

// Start starts spec's child and returns once it runs.
func Start(spec Spec) (*Process, error) {
	if len(spec.Shim) == 0 || len(spec.Args) == 0 {
		return nil, errors.New("child: start: no shim or no command")
	}
	argv := append(append(append([]string{}, spec.Shim[1:]...), strconv.Itoa(os.Getpid()), "--"), spec.Args...)
	cmd := exec.Command(spec.Shim[0], argv...)
	cmd.Env = spec.Env
	cmd.Stdout, cmd.Stderr = spec.Stdout, spec.Stderr
	// A process that left the group and kept the pipes open must not keep
	// Wait waiting for ever.
	cmd.WaitDelay = time.Second
	cmd.SysProcAttr = shimAttr()

	p := &Process{done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		// This goroutine starts the shim and waits for it, on one OS thread
		// that lives as long as the shim: the parent-death signal is tied
		// to the thread. It is not unlocked: when the goroutine returns the
		// thread ends, which is harmless once the shim has been reaped.
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		p.pid = cmd.Process.Pid
		started <- nil
		p.err = waitExited(p.pid)
		// The shim has exited but is not reaped: its pid, the group's id,
		// stays reserved while the rest of the group is killed.
		_ = syscall.Kill(-p.pid, syscall.SIGKILL)
		werr := cmd.Wait()
		p.state = cmd.ProcessState
		var ee *exec.ExitError
		if p.err == nil && werr != nil && !errors.As(werr, &ee) && !errors.Is(werr, exec.ErrWaitDelay) {
			p.err = werr
		}
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("child: start %s: %w", spec.Args[0], err)
	}
	return p, nil
}

// Pid is the process group's id (the shim's pid).
func (p *Process) Pid() int { return p.pid }

// CPU returns the CPU time (user and system) the shim used with that of
// the children it reaped, the command's and what the command reaped, once
// Done is closed; 0 before.
func (p *Process) CPU() time.Duration {
	select {
	case <-p.done:
	default:
		return 0
	}
	if p.state == nil {
		return 0
	}
	return p.state.UserTime() + p.state.SystemTime()
}

// Done is closed once the child and every process of its group have exited
// and the child has been reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Status describes how the child ended: its exit code, or -1 and the signal
// that killed it. Valid once Done is closed.
func (p *Process) Status() (code int, sig syscall.Signal) {
	if p.state == nil {
		return -1, 0
	}
	if ws, ok := p.state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return -1, ws.Signal()
	}
	code = p.state.ExitCode()
	if code > 128 && code < 128+65 {
		// The shim reports a command killed by a signal as 128+signal, as
		// shells do.
		return -1, syscall.Signal(code - 128)
	}
	return code, 0
}

// Describe says in words how the child ended.
func (p *Process) Describe() string {
	if p.err != nil {
		return "waiting for it failed: " + p.err.Error()
	}
	code, sig := p.Status()
	if sig != 0 {
		return "killed by " + sig.String()
	}
	return fmt.Sprintf("exit status %d", code)
}

// Signal sends sig to the child's whole process group, unless the child has
// been reaped (its group's id may then belong to someone else).
func (p *Process) Signal(sig syscall.Signal) {
	select {
	case <-p.done:
		return
	default:
	}
	// Between the check above and the kill the shim may exit, but it is
	// not reaped before its group is killed (see Start), so the id still
	// names this group or no group at all.
	_ = syscall.Kill(-p.pid, sig)
}

// Stop sends SIGTERM to the child's process group, SIGKILL after grace if
// it has not ended, and returns once it has. A grace of zero or less kills at
// once. It reports whether SIGKILL was needed.
func (p *Process) Stop(grace time.Duration) (killed bool) {
	if grace <= 0 {
		p.Signal(syscall.SIGKILL)
		<-p.done
		return true
	}
	p.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
		return false
	case <-t.C:
	}
	p.Signal(syscall.SIGKILL)
	<-p.done
	return true
}

// Lines copies what is written to it to out one whole line at a time, each
// prefixed, so that the output of several children interleaves by lines.
// A line longer than MaxLine is cut into pieces of MaxLine bytes, each
// prefixed and ended with a newline. Safe for one writer; out is shared
// through mu.
type Lines struct {
	prefix []byte
	out    io.Writer
	mu     *sync.Mutex
	buf    []byte
}

// MaxLine is the longest line Lines writes in one piece.
const MaxLine = 64 << 10

// NewLines returns a Lines writing to out under mu.
func NewLines(out io.Writer, mu *sync.Mutex, prefix string) *Lines {
	return &Lines{prefix: []byte(prefix), out: out, mu: mu}
}

func (l *Lines) Write(b []byte) (int, error) {
	n := len(b)
	for len(b) > 0 {
		i := 0
		for i < len(b) && b[i] != '\n' && len(l.buf)+i < MaxLine {
			i++
		}
		if i < len(b) && b[i] == '\n' {
			l.buf = append(l.buf, b[:i+1]...)
			b = b[i+1:]
			l.emit()
			continue
		}
		l.buf = append(l.buf, b[:i]...)
		b = b[i:]
		if len(l.buf) >= MaxLine {
			l.buf = append(l.buf, '\n')
			l.emit()
		}
	}
	return n, nil
}

// Flush writes a last unterminated line, with a newline.
func (l *Lines) Flush() {
	if len(l.buf) > 0 {
		l.buf = append(l.buf, '\n')
		l.emit()
	}
}

func (l *Lines) emit() {
	l.mu.Lock()
	_, _ = l.out.Write(append(append([]byte{}, l.prefix...), l.buf...))
	l.mu.Unlock()
	l.buf = l.buf[:0]
}
