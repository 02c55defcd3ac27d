package child

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"sync"
	"time"
)

// CPU measures the CPU time of children's process groups, for their
// partitions' loads: it reads /proc once per period for every group
// (Linux; elsewhere it measures nothing), and each child's load is the
// CPU seconds its group used per second between two reads.
type CPU struct {
	mu     sync.Mutex
	period time.Duration
	at     time.Time
	groups map[int]time.Duration // process group -> CPU time of its live members and their reaped children
	err    error
}

// NewCPU returns a meter that reads /proc at most once per period.
func NewCPU(period time.Duration) *CPU { return &CPU{period: period} }

// Group returns the CPU time so far of process group pgid (the user and
// system time of its live processes, plus that of the children they
// reaped, the command's own when the shim reaps it), as of the latest
// read of /proc, made now if the last is older than the period.
func (c *CPU) Group(pgid int) (time.Duration, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.groups == nil || time.Since(c.at) >= c.period {
		c.groups, c.err = readGroups()
		c.at = time.Now()
	}
	if c.err != nil {
		return 0, c.err
	}
	return c.groups[pgid], nil
}

// clockTicks is the kernel's USER_HZ, the unit of /proc/<pid>/stat's
// times: 100 on every Linux architecture Go supports.
const clockTicks = 100

// readGroups sums /proc/<pid>/stat's utime, stime, cutime and cstime by
// process group.
func readGroups() (map[int]time.Duration, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, errors.New("reading /proc for the children's CPU time: " + err.Error())
	}
	out := map[int]time.Duration{}
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // exited meanwhile
		}
		pgid, ticks, ok := parseStat(b)
		if ok {
			out[pgid] += time.Duration(ticks) * time.Second / clockTicks
		}
	}
	return out, nil
}

// parseStat reads the process group (field 5) and utime + stime + cutime
// + cstime (fields 14 to 17) of a /proc/<pid>/stat line; the command name
// (field 2) is in parentheses and may hold spaces, so fields are counted
// after its last ')'.
func parseStat(b []byte) (pgid int, ticks int64, ok bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := bytes.Fields(b[i+1:]) // f[0] is field 3 (state)
	if len(f) < 15 {
		return 0, 0, false
	}
	pg, err := strconv.Atoi(string(f[2]))
	if err != nil {
		return 0, 0, false
	}
	for _, s := range f[11:15] {
		n, err := strconv.ParseInt(string(s), 10, 64)
		if err != nil {
			return 0, 0, false
		}
		ticks += n
	}
	return pg, ticks, true
}
