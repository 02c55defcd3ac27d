package child

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"
)

// ShimMain is the shim's whole program (see the package doc): args are the
// parent's pid, "--", and the command with its arguments. It returns the
// exit code to exit with: the command's, 128+signal if a signal killed it,
// 127 if it could not be started, 2 for bad arguments.
//
// It must run as the leader of its own process group, with the parent-death
// signal set; Start arranges both.
func ShimMain(args []string) int {
	if len(args) < 3 || args[1] != "--" {
		fmt.Fprintln(os.Stderr, "herd child shim: usage: PARENT_PID -- COMMAND [ARGS...] (run by herd run, not by hand)")
		return 2
	}
	parent, err := strconv.Atoi(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, "herd child shim: bad parent pid:", args[0])
		return 2
	}
	// Catch, do not ignore: an ignored signal stays ignored in the command
	// after exec, a caught one is reset to its default.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, deathSignal, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	// If the parent died before the handler was installed, the death signal
	// was either fatal to the shim (nothing started yet) or already
	// delivered; and if it died before the kernel could tie the signal to
	// it, the shim has been reparented. Either way: start nothing.
	if os.Getppid() != parent {
		return 128 + int(syscall.SIGKILL)
	}

	// The command runs in the shim's group. Its own parent-death signal
	// covers the shim being killed alone by someone.
	runtime.LockOSThread()
	cmd := exec.Command(args[2], args[3:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, os.Stdout, os.Stderr
	cmd.SysProcAttr = commandAttr()
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "herd run:", err)
		return 127
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	for {
		select {
		case sig := <-sigs:
			if sig == deathSignal && os.Getppid() != parent {
				// herd run is gone: take the whole group down, the shim
				// included.
				_ = syscall.Kill(0, syscall.SIGKILL)
			}
			// SIGTERM and the like were sent to the whole group: the
			// command got them too and decides what to do.
		case err := <-waited:
			var ee *exec.ExitError
			switch {
			case err == nil:
				return 0
			case errors.As(err, &ee):
				if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
					return 128 + int(ws.Signal())
				}
				return ee.ExitCode()
			default:
				fmt.Fprintln(os.Stderr, "herd run: waiting for the command:", err)
				return 1
			}
		}
	}
}
