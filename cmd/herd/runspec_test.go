package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// --partitions is a set of ids in herd run: a bare number or a single word
// runs one partition of that name, with a warning that says so (for a
// number: did you mean 0-N?); HERD_PARTITIONS alike.
func TestRunWarnsSpecLikeACount(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		args []string
		want string
	}{
		{nil, []string{"--partitions", "32"}, `--partitions 32 is one partition, named \"32\", not a count of partitions: did you mean 0-31?`},
		{[]string{"HERD_PARTITIONS=many"}, nil, `HERD_PARTITIONS (--partitions) \"many\" is a set of one partition, named \"many\"`},
	} {
		db := "sqlite://" + filepath.Join(t.TempDir(), "herd.db")
		args := append(append([]string{"--store", db, "--group", "g"}, tc.args...), "--", "sleep", "60")
		m := startRun(t, "m", tc.env, args...)
		eventually(t, 20*time.Second, "the warning", func() bool {
			return strings.Contains(m.out.String(), "level=WARN msg=\""+tc.want)
		})
	}
	for spec, want := range map[string]string{"0": "", "0-31": "", "a,b": "", "@file": "", "7": "did you mean 0-6?", "orders": "a set of one partition"} {
		if got := specWarning("--partitions", spec); want == "" && got != "" || !strings.Contains(got, want) {
			t.Errorf("specWarning(%q) = %q; want %q", spec, got, want)
		}
	}
}

// demo and bench take the number of partitions as --partition-count; the
// old spelling --partitions still works, with a warning, and
// HERD_PARTITIONS (herd run's set) does not set it.
func TestPartitionCountFlag(t *testing.T) {
	r := runHerdBin(t, "", nil, "demo", "--partition-count", "0")
	if r.code == 0 || !strings.Contains(r.stderr, "--partition-count must be between 1 and 125,000 (got 0)") {
		t.Errorf("demo --partition-count 0: exit %d, %q", r.code, r.stderr)
	}
	r = runHerdBin(t, "", nil, "bench", "--partitions", "0")
	if r.code == 0 || !strings.Contains(r.stderr, "--partitions has been deprecated, use --partition-count") ||
		!strings.Contains(r.stderr, "--partition-count must be between 1 and 125,000 (got 0)") {
		t.Errorf("bench --partitions 0: exit %d, %q; want the deprecation and the range", r.code, r.stderr)
	}
	r = runHerdBin(t, "", []string{"HERD_PARTITIONS=0-31", "HERD_PARTITION_COUNT=0"}, "demo")
	if r.code == 0 || strings.Contains(r.stderr, "HERD_PARTITIONS") || !strings.Contains(r.stderr, "set by HERD_PARTITION_COUNT") {
		t.Errorf("demo with HERD_PARTITIONS and HERD_PARTITION_COUNT: exit %d, %q; want only the count read", r.code, r.stderr)
	}
}

// herd run refuses mem://: every process would have a store of its own.
func TestRunRefusesMemStore(t *testing.T) {
	r := runHerdBin(t, "", nil, "run", "--store", "mem://", "--group", "g", "--partitions", "0-3", "--", "true")
	if r.code != exitUsage || !strings.Contains(r.stderr, "--store mem:// is this process's own store") {
		t.Errorf("run --store mem://: exit %d, %q; want exit %d", r.code, r.stderr, exitUsage)
	}
}

// The shim each child of herd run runs under is named herd, so that
// pgrep herd finds it (it runs as /proc/self/exe, which the kernel would
// name "exe").
func TestShimNamedHerd(t *testing.T) {
	db := "sqlite://" + filepath.Join(t.TempDir(), "herd.db")
	m := startRun(t, "m", nil, "--store", db, "--group", "g", "--partitions", "0", "--", "sleep", "60")
	var shims []string
	eventually(t, 20*time.Second, "the child's shim", func() bool {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", m.cmd.Process.Pid, m.cmd.Process.Pid))
		shims = strings.Fields(string(b))
		if len(shims) == 0 {
			// the shim may be a child of another thread of herd run
			ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", m.cmd.Process.Pid))
			for _, e := range ents {
				b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", m.cmd.Process.Pid, e.Name()))
				shims = append(shims, strings.Fields(string(b))...)
			}
		}
		if len(shims) == 0 {
			return false
		}
		comm, _ := os.ReadFile("/proc/" + shims[0] + "/comm")
		return strings.TrimSpace(string(comm)) == "herd"
	})
}
