package main

// herd run killed by the kernel's OOM killer: a member in a memory cgroup
// of its own (cgroup v2, or v1 where the memory controller is mounted
// there), made to exceed its limit.

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// memCgroup is a memory cgroup a test made, removed when it ends.
type memCgroup struct {
	dir   string
	v2    bool
	limit string // the file of the limit: memory.max or memory.limit_in_bytes
	usage string // memory.current or memory.usage_in_bytes
}

// cgroupMounts returns the mount points of the cgroup v2 hierarchy and of
// the v1 memory controller ("" where none).
func cgroupMounts() (v2, v1mem string) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, pf := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(pf) < 3 {
			continue
		}
		switch {
		case pf[0] == "cgroup2":
			v2 = fields[4]
		case pf[0] == "cgroup" && strings.Contains(","+pf[2]+",", ",memory,"):
			v1mem = fields[4]
		}
	}
	return v2, v1mem
}

// ownCgroup is this process's cgroup path in the hierarchy whose
// /proc/self/cgroup line has controllers ctl ("" for v2).
func ownCgroup(ctl string) string {
	b, _ := os.ReadFile("/proc/self/cgroup")
	for line := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && (ctl == "" && parts[0] == "0" || ctl != "" && strings.Contains(","+parts[1]+",", ","+ctl+",")) {
			return parts[2]
		}
	}
	return ""
}

// newMemCgroup makes a memory cgroup under this process's own, with no
// limit yet. It skips the test, saying why, where no memory cgroup can be
// made (not root, no memory controller, a read-only hierarchy).
func newMemCgroup(t *testing.T) *memCgroup {
	t.Helper()
	name := fmt.Sprintf("herd-test-oom-%d", os.Getpid())
	v2, v1 := cgroupMounts()
	var why []string
	if v2 != "" {
		parent := filepath.Join(v2, ownCgroup(""))
		ctl, _ := os.ReadFile(filepath.Join(parent, "cgroup.subtree_control"))
		if strings.Contains(" "+string(ctl)+" ", " memory ") || strings.Contains(string(ctl), "memory") {
			c := &memCgroup{dir: filepath.Join(parent, name), v2: true, limit: "memory.max", usage: "memory.current"}
			if err := c.make(t); err == nil {
				return c
			} else {
				why = append(why, err.Error())
			}
		} else {
			why = append(why, "cgroup v2 at "+v2+": the memory controller is not enabled for children of "+parent)
		}
	}
	if v1 != "" {
		c := &memCgroup{dir: filepath.Join(v1, ownCgroup("memory"), name), limit: "memory.limit_in_bytes", usage: "memory.usage_in_bytes"}
		if err := c.make(t); err == nil {
			return c
		} else {
			why = append(why, err.Error())
		}
	}
	if len(why) == 0 {
		why = append(why, "no cgroup hierarchy mounted")
	}
	t.Skipf("no writable memory cgroup to put a member in (run as root with cgroup v2's memory controller, or v1's): %s", strings.Join(why, "; "))
	return nil
}

// make creates the cgroup, and removes it when the test ends (killing
// what is left in it: the test's own processes).
func (c *memCgroup) make(t *testing.T) error {
	if err := os.Mkdir(c.dir, 0o755); err != nil {
		return fmt.Errorf("making the cgroup %s: %w", c.dir, err)
	}
	if c.v2 {
		_ = os.WriteFile(filepath.Join(c.dir, "memory.swap.max"), []byte("0"), 0)
	} else {
		_ = os.WriteFile(filepath.Join(c.dir, "memory.swappiness"), []byte("0"), 0)
	}
	t.Cleanup(func() {
		for range 100 {
			b, _ := os.ReadFile(filepath.Join(c.dir, "cgroup.procs"))
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			if err := os.Remove(c.dir); err == nil || errors.Is(err, os.ErrNotExist) {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Errorf("cannot remove the test's cgroup %s: remove it by hand (rmdir)", c.dir)
	})
	return nil
}

// add moves process pid into the cgroup.
func (c *memCgroup) add(t *testing.T, pid int) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(c.dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
		t.Fatalf("moving process %d into the cgroup %s: %v", pid, c.dir, err)
	}
}

func (c *memCgroup) read(file string) string {
	b, _ := os.ReadFile(filepath.Join(c.dir, file))
	return strings.TrimSpace(string(b))
}

// limitAbove sets the limit to the cgroup's usage now plus margin bytes.
func (c *memCgroup) limitAbove(t *testing.T, margin int64) int64 {
	t.Helper()
	use, err := strconv.ParseInt(c.read(c.usage), 10, 64)
	if err != nil {
		t.Fatalf("reading %s of %s: %v", c.usage, c.dir, err)
	}
	limit := use + margin
	if err := os.WriteFile(filepath.Join(c.dir, c.limit), []byte(strconv.FormatInt(limit, 10)), 0); err != nil {
		t.Fatalf("setting %s of %s: %v", c.limit, c.dir, err)
	}
	return limit
}

// oomKills is how many processes of the cgroup the OOM killer killed (-1:
// the kernel does not say).
func (c *memCgroup) oomKills() int {
	file := "memory.oom_control"
	if c.v2 {
		file = "memory.events"
	}
	for line := range strings.SplitSeq(c.read(file), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == "oom_kill" {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return -1
}

// A herd run member in a memory cgroup of its own (its children start in
// it too), whose heap grows (GOGC=off) past the cgroup's limit: the
// kernel's OOM killer kills the member itself, its children die with it
// (the shim), and its partitions run elsewhere within 3 s at a TTL of 10 s
// (its session tied), with no two live children of one partition.
func TestRunE2EOOMKilled(t *testing.T) {
	for _, tc := range []struct {
		name string
		args func(t *testing.T, dir string) []string
	}{
		{"sqlite", func(t *testing.T, dir string) []string {
			return []string{"--store", "sqlite://" + filepath.Join(dir, "oom.db")}
		}},
		{"postgres", func(t *testing.T, dir string) []string { u, _ := pgURL(t); return []string{"--store", u} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cg := newMemCgroup(t)
			dir := t.TempDir()
			how := death{
				env:     []string{"GOGC=off"},
				started: func(t *testing.T, m *member) { cg.add(t, m.cmd.Process.Pid) },
				kill: func(t *testing.T, m *member) time.Time {
					limit := cg.limitAbove(t, 2<<20)
					select {
					case <-m.done:
					case <-time.After(2 * time.Minute):
						t.Fatalf("the member in the cgroup (limit %d bytes, usage %s) was not killed within 2 minutes", limit, cg.read(cg.usage))
					}
					died := time.Now()
					ws, _ := m.cmd.ProcessState.Sys().(syscall.WaitStatus)
					if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
						t.Fatalf("the member in the cgroup ended with %v; want killed by SIGKILL (the OOM killer)", m.cmd.ProcessState)
					}
					if n := cg.oomKills(); n == 0 {
						t.Fatalf("the member was killed, but the cgroup counts no OOM kill")
					}
					t.Logf("the OOM killer killed the member (cgroup %s, limit %d bytes, v2 %v)", cg.dir, limit, cg.v2)
					return died
				},
			}
			testRunE2EDeath(t, dir, tc.args(t, dir), 10*time.Second, 3*time.Second, how)
		})
	}
}
