package netpart

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// hold waits d, or until ctx ends. The fault schedule is made of these.
func hold(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// member is one herd run in its namespace.
type member struct {
	cmd  *exec.Cmd
	out  *os.File
	done chan struct{}
}

// startMember starts herd run as member i in its namespace, its child
// logging to dir/m<i>.log, its own output to dir/m<i>.out.
func startMember(cfg *Config, n *Net, i int, storeURL string) (*member, error) {
	out, err := os.Create(filepath.Join(cfg.Dir, fmt.Sprintf("m%d.out", i)))
	if err != nil {
		return nil, fmt.Errorf("netpart: member output: %w", err)
	}
	script := filepath.Join(cfg.Dir, "child.sh")
	cmd := exec.Command("ip", "netns", "exec", n.Namespace(i), cfg.HerdBin, "run",
		"--store", storeURL, "--group", "netpart", "--member", fmt.Sprintf("m%d", i),
		"--partitions", fmt.Sprintf("0-%d", cfg.Partitions-1), "--ttl", cfg.TTL.String(),
		"--max-shutdown", "1s", "--restart-delay", "100ms", "--restart-max", "1s",
		"--max-failures", "0", "--", "/bin/bash", script)
	cmd.Env = append(os.Environ(),
		"PATH="+filepath.Dir(cfg.HerdBin)+":"+os.Getenv("PATH"),
		"NETPART_LOG="+filepath.Join(cfg.Dir, fmt.Sprintf("m%d.log", i)),
		"NETPART_DIR="+cfg.Dir,
		"TMPDIR="+cfg.Dir, // a member killed leaves its checkpoint socket's directory in the run's
		"HERD_LOG_LEVEL=debug")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		out.Close()
		return nil, fmt.Errorf("netpart: start member %d: %w", i, err)
	}
	m := &member{cmd: cmd, out: out, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(m.done) }()
	return m, nil
}

// leave sends SIGTERM (herd run hands its partitions off and leaves) and
// SIGKILL if it has not exited within grace.
func (m *member) leave(grace time.Duration) {
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
	case <-time.After(grace):
		_ = m.cmd.Process.Kill()
		<-m.done
	}
	m.out.Close()
}

// stopProcess is leave for a process without its own waiter, stopped by
// sig.
func stopProcess(cmd *exec.Cmd, sig syscall.Signal, grace time.Duration) {
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(grace):
		_ = cmd.Process.Kill()
		<-done
	}
}

// waitAllRunning waits until every partition's child has started once.
func waitAllRunning(ctx context.Context, cfg *Config, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		started := map[string]bool{}
		for i := 0; i < cfg.Members; i++ {
			evs, err := ReadLog(filepath.Join(cfg.Dir, fmt.Sprintf("m%d.log", i)), i)
			if err != nil {
				return err
			}
			for _, e := range evs {
				started[e.Partition] = started[e.Partition] || e.Kind == "start"
			}
		}
		if len(started) == cfg.Partitions {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("netpart: %d of %d partitions started within %v", len(started), cfg.Partitions, within)
		}
		if err := hold(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

// BuildHerd builds ./cmd/herd of the module in moduleDir into dir.
func BuildHerd(ctx context.Context, moduleDir, dir string) (string, error) {
	bin := filepath.Join(dir, "herd")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/herd")
	cmd.Dir = moduleDir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("netpart: go build ./cmd/herd: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return bin, nil
}

// Missing names the tools a run needs that this machine lacks (not root,
// no ip, tc, nft, redis-server, bash or flock), empty when it has them all.
func Missing() []string {
	var m []string
	if os.Geteuid() != 0 {
		m = append(m, "root")
	}
	for _, t := range []string{"ip", "tc", "nft", "redis-server", "bash", "flock"} {
		if _, err := exec.LookPath(t); err != nil {
			m = append(m, t)
		}
	}
	if len(m) == 0 {
		if err := exec.Command("ip", "netns", "list").Run(); err != nil {
			m = append(m, "ip netns ("+err.Error()+")")
		}
	}
	return m
}
