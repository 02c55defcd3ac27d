package child

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// parseStat finds the group and the four CPU times after a command name
// holding spaces and parentheses.
func TestParseStat(t *testing.T) {
	line := []byte("4242 (my (odd) cmd) S 1 4240 4240 0 -1 4194560 100 0 0 0 150 50 7 3 20 0 1 0 100 1000 10")
	pg, ticks, ok := parseStat(line)
	if !ok || pg != 4240 || ticks != 210 {
		t.Fatalf("parseStat = %d, %d, %v; want group 4240, 210 ticks", pg, ticks, ok)
	}
	if _, _, ok := parseStat([]byte("1 (x) S 1")); ok {
		t.Fatal("parseStat of a short line: ok; want not ok")
	}
}

// CPU reads this process's own group: its CPU time grows as it spins.
func TestCPUOwnGroup(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	c := NewCPU(0)
	pg := syscall.Getpgrp()
	before, err := c.Group(pg)
	if err != nil {
		t.Fatal(err)
	}
	// Spin until this process has used 300 ms of CPU by its own count
	// (getrusage), however long a loaded machine makes that take: a spin
	// of 300 ms of wall time got 80 ms of CPU in a CI run.
	spun := ownCPU(t)
	for deadline := time.Now().Add(time.Minute); ownCPU(t)-spun < 300*time.Millisecond; {
		if time.Now().After(deadline) {
			t.Fatal("this process got less than 300ms of CPU in a minute")
		}
	}
	after, err := c.Group(pg)
	if err != nil {
		t.Fatal(err)
	}
	if after-before < 100*time.Millisecond {
		t.Fatalf("group %d used %v of CPU while this test used 300ms; want at least 100ms", pg, after-before)
	}
}

// ownCPU is this process's user and system CPU time, from getrusage.
func ownCPU(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
