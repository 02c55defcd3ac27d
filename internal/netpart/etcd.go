package netpart

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/herdhq/herd/internal/etcdtest"
)

// etcdPort is the etcd server's client port on the run's root-side
// addresses.
const etcdPort = "2379"

// startEtcd starts a single-node etcd (the tests' build, internal/etcdtest)
// serving clients on addrs, its peer port on a free loopback port no fault
// touches, its data in dir.
func startEtcd(ctx context.Context, dir string, addrs []string) (*server, error) {
	bin, err := etcdtest.Binary()
	if err != nil {
		return nil, fmt.Errorf("netpart: %w", err)
	}
	ports, err := etcdtest.FreePorts(1)
	if err != nil {
		return nil, fmt.Errorf("netpart: a port for etcd's peers: %w", err)
	}
	var clients []string
	for _, a := range addrs {
		clients = append(clients, "http://"+net.JoinHostPort(a, etcdPort))
	}
	peer := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	args := etcdtest.Args("n0", filepath.Join(dir, "etcd"), 0, ports[0], "n0="+peer)
	for i, a := range args {
		if a == "--listen-client-urls" || a == "--advertise-client-urls" {
			args[i+1] = strings.Join(clients, ",")
		}
	}
	cmd := exec.Command(bin, args...)
	logf, err := os.Create(filepath.Join(dir, "etcd.log"))
	if err == nil {
		cmd.Stdout, cmd.Stderr = logf, logf
		defer logf.Close()
	}
	s := &server{cmd: cmd, stop: syscall.SIGKILL,
		urlOf: func(a string) string { return "etcd://" + net.JoinHostPort(a, etcdPort) }}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("netpart: start etcd: %w", err)
	}
	for _, a := range addrs {
		if err := etcdtest.WaitHealthy(net.JoinHostPort(a, etcdPort), 30*time.Second); err != nil {
			s.close()
			return nil, fmt.Errorf("netpart: %w", err)
		}
		if err := ctx.Err(); err != nil {
			s.close()
			return nil, err
		}
	}
	return s, nil
}
