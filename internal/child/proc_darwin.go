package child

import (
	"syscall"
)

// shimAttr starts the shim as the leader of a new process group. macOS has
// no parent-death signal: a child outlives a member killed with SIGKILL
// there (the package's guarantee is Linux's).
func shimAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// commandAttr starts the command in the shim's group.
func commandAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }

// wNowait is waitid's WNOWAIT (see waitExited).
const wNowait = 0x20
