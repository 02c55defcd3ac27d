//go:build !linux

package main

import (
	"errors"
	"os"
	"os/exec"
	"time"
)

// memberProcAttr: only Linux can tie a child's life to its parent's; the
// members also leave when their stdin (the bench) closes.
func memberProcAttr(*exec.Cmd) {}

// lowerPriority: members keep the bench's priority outside Linux.
func lowerPriority(int) error { return nil }

// procCPUSeconds: not measured while the process runs outside Linux.
func procCPUSeconds(int) (float64, bool) { return 0, false }

// procPeakRSS: not measured while the process runs outside Linux.
func procPeakRSS(int) (uint64, bool) { return 0, false }

// exitedUsage is a reaped process's CPU seconds (its peak RSS: not
// measured outside Linux).
func exitedUsage(ps *os.ProcessState) (float64, uint64) {
	return ps.UserTime().Seconds() + ps.SystemTime().Seconds(), 0
}

// localPostgresCPU: not measured outside Linux.
func localPostgresCPU() (time.Duration, error) {
	return 0, errors.New("the PostgreSQL server's CPU is measured on Linux only")
}
