package child

import (
	"syscall"
)

// shimAttr starts the shim as the leader of a new process group, with the
// parent-death signal.
func shimAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: deathSignal}
}

// commandAttr starts the command in the shim's group, killed if the shim
// dies.
func commandAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }

// wNowait is waitid's WNOWAIT (see waitExited).
const wNowait = 0x1000000
