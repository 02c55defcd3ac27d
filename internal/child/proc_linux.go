package child

import (
	"fmt"
	"syscall"
	"unsafe"
)

// shimAttr starts the shim as the leader of a new process group, with the
// parent-death signal.
func shimAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: deathSignal}
}

// commandAttr starts the command in the shim's group, killed if the shim
// dies.
func commandAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }

// waitExited blocks until process pid has exited, without reaping it
// (waitid with WEXITED|WNOWAIT).
func waitExited(pid int) error {
	const (
		pPID    = 1
		wExited = 0x4
		wNowait = 0x1000000
	)
	var info [128]byte // siginfo_t
	for {
		_, _, e := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid), uintptr(unsafe.Pointer(&info[0])), wExited|wNowait, 0, 0)
		switch e {
		case 0:
			return nil
		case syscall.EINTR:
			continue
		default:
			return fmt.Errorf("waitid: %w", e)
		}
	}
}
