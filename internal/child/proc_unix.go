//go:build linux || darwin

package child

import (
	"fmt"
	"syscall"
	"unsafe"
)

// waitExited blocks until process pid has exited, without reaping it
// (waitid with WEXITED|WNOWAIT; wNowait is the OS's value).
func waitExited(pid int) error {
	const (
		pPID    = 1
		wExited = 0x4
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
