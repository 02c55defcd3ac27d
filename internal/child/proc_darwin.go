package child

import (
	"fmt"
	"syscall"
	"unsafe"
)

// shimAttr starts the shim as the leader of a new process group. macOS has
// no parent-death signal: a child outlives a member killed with SIGKILL
// there (the package's guarantee is Linux's).
func shimAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// commandAttr starts the command in the shim's group.
func commandAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }

// waitExited blocks until process pid has exited, without reaping it
// (waitid with WEXITED|WNOWAIT, macOS's values).
func waitExited(pid int) error {
	const (
		pPID    = 1
		wExited = 0x4
		wNowait = 0x20
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
