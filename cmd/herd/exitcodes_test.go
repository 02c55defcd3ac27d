package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runHerd runs the built herd with args (and env added) to its end and
// returns its exit status and stderr.
func runHerd(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(buildHerd(t), "herd"), args...)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), stderr.String()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, stderr.String()
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("herd %v did not end within 60s:\n%s", args, stderr.String())
	}
	return 0, ""
}

// Usage errors, wherever they are found (cobra's flag and argument checks,
// a HERD_* variable, a flag's range, an unknown command), exit with 2.
func TestExitUsage(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		args []string
	}{
		{nil, []string{"run", "--bogus"}},
		{nil, []string{"run", "--group", "g", "--ttl", "x", "--", "true"}},
		{nil, []string{"run", "--group", "g", "--ttl", "1ns", "--", "true"}},
		{nil, []string{"run", "--", "true"}},
		{nil, []string{"run", "--group", "g"}},
		{[]string{"HERD_TTL=zz"}, []string{"run", "--group", "g", "--", "true"}},
		{nil, []string{"jobs", "--group", "g", "--every", "1ms", "--", "true"}},
		{nil, []string{"demo", "--partitions", "0"}},
		{nil, []string{"status", "--store", "sqlite://x.db", "extra"}},
		{nil, []string{"status", "--store", "nope://x"}},
		{nil, []string{"stauts"}},
		{nil, []string{"--log-level", "loud", "status", "--store", "sqlite://x.db"}},
	} {
		code, stderr := runHerd(t, tc.env, tc.args...)
		if code != exitUsage {
			t.Errorf("%v herd %v: exit %d; want %d (usage)\n%s", tc.env, tc.args, code, exitUsage, stderr)
		}
	}
}

// A store that cannot be reached exits with 4 (run and jobs once their
// --join-timeout has passed: they retry a store that is down until then).
func TestExitUnreachable(t *testing.T) {
	addr := freeLoopbackAddr(t) // nothing listens there any more
	for _, args := range [][]string{
		{"run", "--store", "redis://" + addr, "--group", "g", "--join-timeout", "1s", "--", "true"},
		{"jobs", "--store", "postgres://" + addr + "/test", "--group", "g", "--join-timeout", "1s", "--every", "1m", "--", "true"},
		{"status", "--store", "redis://" + addr, "--group", "g"},
	} {
		if code, stderr := runHerd(t, nil, args...); code != exitUnreachable {
			t.Errorf("herd %v: exit %d; want %d (unreachable)\n%s", args, code, exitUnreachable, stderr)
		}
	}
}

// Deleting a group with a live member exits with 6.
func TestExitInUse(t *testing.T) {
	dir := t.TempDir()
	u := "sqlite://" + filepath.Join(dir, "herd.db")
	m := startRunIn(t, "m", dir, nil, "--store", u, "--group", "g", "--partitions", "0", "--", "sleep", "600")
	eventually(t, 30*time.Second, "the member joined", func() bool { return strings.Contains(m.out.String(), "joined") })
	if code, stderr := runHerd(t, nil, "group", "delete", "--store", u, "--group", "g"); code != exitInUse {
		t.Errorf("herd group delete of a group with a live member: exit %d; want %d (in use)\n%s", code, exitInUse, stderr)
	}
}

// With --log-format json (or HERD_LOG_FORMAT=json) the last line is one
// JSON object: level, msg, error and exit code; in text it is "herd: ...".
func TestFinalErrorLine(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		args []string
	}{
		{nil, []string{"--log-format", "json", "run", "--group", "g", "--ttl", "1ns", "--", "true"}},
		{[]string{"HERD_LOG_FORMAT=json"}, []string{"run", "--bogus"}},
	} {
		code, stderr := runHerd(t, tc.env, tc.args...)
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		var line struct {
			Level    string `json:"level"`
			Msg      string `json:"msg"`
			Error    string `json:"error"`
			ExitCode *int   `json:"exit_code"`
		}
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &line); err != nil {
			t.Errorf("herd %v: last line %q is not JSON: %v", tc.args, lines[len(lines)-1], err)
			continue
		}
		if line.Level != "ERROR" || line.Msg == "" || line.Error == "" || line.ExitCode == nil || *line.ExitCode != code || code != exitUsage {
			t.Errorf("herd %v: exit %d, last line %+v; want level ERROR, a msg, the error and exit_code %d", tc.args, code, line, exitUsage)
		}
	}
	if _, stderr := runHerd(t, nil, "run", "--bogus"); stderr != "herd: unknown flag: --bogus\n" {
		t.Errorf("text error line: %q", stderr)
	}
}
