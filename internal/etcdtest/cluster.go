package etcdtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Node is one member of a cluster a test started.
type Node struct {
	Name   string
	Client int // client port
	cmd    *exec.Cmd
	exit   chan struct{}
}

// Addr is the node's client address, host:port.
func (n *Node) Addr() string { return "127.0.0.1:" + strconv.Itoa(n.Client) }

// Kill stops the node with SIGKILL and waits for it to exit.
func (n *Node) Kill() {
	if n.cmd == nil || n.cmd.Process == nil {
		return
	}
	_ = n.cmd.Process.Kill()
	<-n.exit
	n.cmd = nil
}

// Cluster starts a cluster of n nodes for t (each with its data in t's
// temporary directory, killed when t ends) and waits until every node is
// healthy. Its timings are etcd's defaults scaled down less than the
// single test server's (a 50 ms heartbeat, a 500 ms election timeout), so
// that a loaded machine does not make it change leaders on its own.
func Cluster(t testing.TB, n int) []*Node {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		SkipOrFail(t, fmt.Sprintf("no etcd binary for a cluster: %v", err))
	}
	ports, err := FreePorts(2 * n)
	if err != nil {
		t.Fatal(err)
	}
	var peers []string
	for i := range n {
		peers = append(peers, fmt.Sprintf("n%d=http://127.0.0.1:%d", i, ports[n+i]))
	}
	dir := t.TempDir()
	nodes := make([]*Node, n)
	for i := range n {
		name := fmt.Sprintf("n%d", i)
		args := append(Args(name, filepath.Join(dir, name), ports[i], ports[n+i], strings.Join(peers, ",")),
			"--heartbeat-interval", "50", "--election-timeout", "500")
		cmd := exec.Command(bin, args...)
		logFile, err := os.Create(filepath.Join(dir, name+".log"))
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = logFile, logFile
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting etcd node %s: %v", name, err)
		}
		_ = logFile.Close()
		node := &Node{Name: name, Client: ports[i], cmd: cmd, exit: make(chan struct{})}
		go func() { _ = cmd.Wait(); close(node.exit) }()
		t.Cleanup(node.Kill)
		nodes[i] = node
	}
	for _, node := range nodes {
		if err := WaitHealthy(node.Addr(), 30*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	return nodes
}

// URL is the store URL of nodes: etcd://a,b,c.
func URL(nodes []*Node) string {
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.Addr())
	}
	return "etcd://" + strings.Join(addrs, ",")
}
