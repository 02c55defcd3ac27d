package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// freePorts returns n distinct free loopback ports. They are free when
// returned; a process started right after binds them.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// Proc is a redis-server (data node or sentinel) child process.
type Proc struct {
	Port int
	cmd  *exec.Cmd
	exit chan struct{}
}

// Addr is the process's host:port.
func (p *Proc) Addr() string { return "127.0.0.1:" + strconv.Itoa(p.Port) }

// Kill stops the process with SIGKILL and waits for it to exit.
func (p *Proc) Kill() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.exit
	p.cmd = nil
}

// startProc starts redis-server with args in dir, killed when t ends, and
// waits until it answers PING.
func startProc(t testing.TB, dir string, port int, args ...string) *Proc {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		SkipOrFail(t, fmt.Sprintf("redis-server is not on PATH (%v)", err))
	}
	cmd := exec.Command(path, args...)
	cmd.Dir = dir
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting redis-server: %v", err)
	}
	p := &Proc{Port: port, cmd: cmd, exit: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.exit) }()
	t.Cleanup(p.Kill)
	c := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, DialerRetries: 1})
	defer c.Close()
	waitFor(t, 10*time.Second, fmt.Sprintf("redis-server on port %d to answer", port), func() bool {
		select {
		case <-p.exit:
			t.Fatalf("redis-server on port %d exited before answering", port)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		return c.Ping(ctx).Err() == nil
	})
	return p
}

// waitFor polls cond every 20 ms until it holds, failing t after within.
func waitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition on a real server
	}
}

// dataArgs are the arguments of a data node without persistence.
func dataArgs(port int, extra ...string) []string {
	return append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--dir", ".",
		"--loglevel", "warning"}, extra...)
}

// Cluster is a Redis Cluster of three primaries without replicas on free
// loopback ports, stopped and removed when the test ends.
type Cluster struct {
	Nodes []*Proc
}

// URL is the cluster's redis+cluster:// URL listing every node.
func (c *Cluster) URL() string {
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr()
	}
	return "redis+cluster://" + strings.Join(addrs, ",")
}

// StartCluster starts three redis-server --cluster-enabled nodes and joins
// them with redis-cli --cluster create, then waits until every node reports
// cluster_state:ok. Without redis-server or redis-cli the test is skipped
// or fails (see SkipOrFail).
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		SkipOrFail(t, fmt.Sprintf("redis-cli is not on PATH (%v)", err))
	}
	dir := t.TempDir()
	ports := freePorts(t, 6) // three client ports, three cluster bus ports
	c := &Cluster{}
	create := []string{"--cluster", "create"}
	for i := range 3 {
		port, bus := ports[i], ports[3+i]
		nd := filepath.Join(dir, strconv.Itoa(port))
		if err := os.Mkdir(nd, 0o700); err != nil {
			t.Fatal(err)
		}
		c.Nodes = append(c.Nodes, startProc(t, nd, port, dataArgs(port,
			"--cluster-enabled", "yes", "--cluster-port", strconv.Itoa(bus),
			"--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000")...))
		create = append(create, c.Nodes[i].Addr())
	}
	create = append(create, "--cluster-replicas", "0", "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, cli, create...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, n := range c.Nodes {
		rc := redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1})
		waitFor(t, 15*time.Second, "cluster_state:ok on "+n.Addr(), func() bool {
			info, err := rc.ClusterInfo(ctx).Result()
			return err == nil && strings.Contains(info, "cluster_state:ok")
		})
		_ = rc.Close()
	}
	return c
}

// SentinelSet is a primary, one replica and three sentinels (quorum 2,
// down-after 1 s) on free loopback ports, stopped and removed when the test
// ends.
type SentinelSet struct {
	Master    string // the master name the sentinels monitor
	Primary   *Proc
	Replica   *Proc
	Sentinels []*Proc
}

// URL is the set's redis+sentinel:// URL listing every sentinel.
func (s *SentinelSet) URL() string {
	addrs := make([]string, len(s.Sentinels))
	for i, n := range s.Sentinels {
		addrs[i] = n.Addr()
	}
	return "redis+sentinel://" + strings.Join(addrs, ",") + "/" + s.Master
}

// StartSentinels starts the set and waits until every sentinel knows the
// replica and the other sentinels, so that a failover can start at once.
func StartSentinels(t testing.TB) *SentinelSet {
	t.Helper()
	dir := t.TempDir()
	ports := freePorts(t, 5)
	s := &SentinelSet{Master: "herdtest"}
	mk := func(name string) string {
		d := filepath.Join(dir, name)
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		return d
	}
	s.Primary = startProc(t, mk("primary"), ports[0], dataArgs(ports[0])...)
	s.Replica = startProc(t, mk("replica"), ports[1], dataArgs(ports[1],
		"--replicaof", "127.0.0.1", strconv.Itoa(ports[0]))...)
	for i := range 3 {
		d := mk("sentinel" + strconv.Itoa(i))
		conf := fmt.Sprintf("port %d\nbind 127.0.0.1\ndaemonize no\nloglevel warning\ndir %s\n"+
			"sentinel monitor %s 127.0.0.1 %d 2\n"+
			"sentinel down-after-milliseconds %s 1000\n"+
			"sentinel failover-timeout %s 5000\n"+
			"sentinel parallel-syncs %s 1\n",
			ports[2+i], d, s.Master, ports[0], s.Master, s.Master, s.Master)
		cf := filepath.Join(d, "sentinel.conf")
		if err := os.WriteFile(cf, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		s.Sentinels = append(s.Sentinels, startProc(t, d, ports[2+i], cf, "--sentinel"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rc := redis.NewClient(&redis.Options{Addr: s.Replica.Addr(), MaxRetries: -1})
	waitFor(t, 15*time.Second, "the replica to sync", func() bool {
		info, err := rc.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "master_link_status:up")
	})
	_ = rc.Close()
	for _, sn := range s.Sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: sn.Addr(), MaxRetries: -1})
		waitFor(t, 15*time.Second, "sentinel "+sn.Addr()+" to see the replica and the other sentinels", func() bool {
			m, err := sc.Master(ctx, s.Master).Result()
			return err == nil && m["num-slaves"] == "1" && m["num-other-sentinels"] == "2"
		})
		_ = sc.Close()
	}
	return s
}
