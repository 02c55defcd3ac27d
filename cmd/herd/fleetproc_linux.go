package main

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// memberProcAttr makes the kernel kill a bench member when the bench's
// thread that started it dies: no member outlives the bench, even one
// killed with SIGKILL.
func memberProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// memberNice is the nice value of every member process: the lowest
// priority, so that a store server on the same host (Redis, PostgreSQL,
// etcd on loopback) gets the CPU it needs, as it does on a host of its own
// in a deployment. At the same priority, 100 member processes leave a
// single-threaded Redis about a hundredth of the two cores of the
// development machine: in the large scenario, with other work on the
// machine (load average 15 to 20), Redis answered no renewal for 9 s while
// the members claimed, every session expired, and every member's read of
// the group again (an HGETALL of 100,000 records, 0.3 to 0.6 s of
// the starved server each) kept it that way for 3 minutes.
const memberNice = 19

// lowerPriority gives a started member process the priority memberNice
// (lowering a priority needs no privilege).
func lowerPriority(pid int) error {
	return syscall.Setpriority(syscall.PRIO_PROCESS, pid, memberNice)
}

// clockTicks is the unit of /proc/PID/stat's CPU times (USER_HZ, 100 on
// every Linux this runs on).
const clockTicks = 100

// procCPUSeconds is the user+system CPU time of a running process, from
// /proc/PID/stat (ok false if it cannot be read).
func procCPUSeconds(pid int) (float64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state); utime is 14, stime 15
	if len(f) < 13 {
		return 0, false
	}
	u, err1 := strconv.ParseFloat(f[11], 64)
	st, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return (u + st) / clockTicks, true
}

// procPeakRSS is a running process's peak resident set size in bytes
// (VmHWM of /proc/PID/status; ok false if it cannot be read).
func procPeakRSS(pid int) (uint64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, false
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		v, ok := strings.CutPrefix(line, "VmHWM:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		if err != nil {
			return 0, false
		}
		return kb << 10, true
	}
	return 0, false
}

// exitedUsage is a reaped process's CPU seconds and peak RSS in bytes.
func exitedUsage(ps *os.ProcessState) (float64, uint64) {
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok {
		return ps.UserTime().Seconds() + ps.SystemTime().Seconds(), 0
	}
	return ps.UserTime().Seconds() + ps.SystemTime().Seconds(), uint64(ru.Maxrss) << 10
}

// localPostgresCPU is the CPU time of the PostgreSQL servers running on
// this host: of each postmaster (a process named postgres whose parent is
// not), its own and its reaped children's (every backend that ended), and
// of each of its running children. Like Redis's INFO cpu it is the whole
// server's, whoever made it busy.
func localPostgresCPU() (time.Duration, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	type proc struct {
		ppid      int
		own, kids float64 // utime+stime, cutime+cstime (seconds)
	}
	pg := map[int]proc{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil || !strings.Contains(string(b), "(postgres)") {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 15 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		n := func(i int) float64 { v, _ := strconv.ParseFloat(f[i], 64); return v / clockTicks }
		pg[pid] = proc{ppid: ppid, own: n(11) + n(12), kids: n(13) + n(14)}
	}
	var sum float64
	for _, p := range pg {
		sum += p.own
		if _, child := pg[p.ppid]; !child {
			sum += p.kids // a postmaster: the backends it reaped
		}
	}
	if len(pg) == 0 {
		return 0, errors.New("no PostgreSQL server process on this host")
	}
	return time.Duration(sum * float64(time.Second)), nil
}
