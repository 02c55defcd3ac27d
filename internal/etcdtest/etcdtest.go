// Package etcdtest gives tests a real etcd server. HERD_ETCD_URL names one
// to use (etcd://host:port,...); without it, the first test that asks
// starts one for its test binary: etcd v3.6 built from its Go module by
// tools/etcdserver (a module of its own, so that the server stays out of
// herd's go.mod) into $HOME/.cache/herd-etcd, on a free loopback port with
// its data in a temporary directory. Main stops it by its pid and removes
// the directory when the package's tests end.
//
// The server runs with a 10 ms heartbeat and a 100 ms election timeout, so
// that leases of one second are granted as asked (etcd raises a lease's TTL
// to 1.5 election timeouts) and a lone node elects itself at once.
package etcdtest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Version is the etcd release the tests build and run.
const Version = "v3.6.16"

var (
	once     sync.Once
	url      string
	startErr error
	proc     *exec.Cmd
	dataDir  string
)

// SkipOrFail skips the test with msg, or fails it when HERD_REQUIRE_SERVERS
// is 1 (as .ci/run sets it).
func SkipOrFail(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("HERD_REQUIRE_SERVERS") == "1" {
		t.Fatalf("%s; HERD_REQUIRE_SERVERS=1, so this is a failure", msg)
	}
	t.Skipf("%s; skipping (set HERD_REQUIRE_SERVERS=1 to fail instead)", msg)
}

// Need returns the URL of the test server (etcd://127.0.0.1:port), starting
// it on first use, or skips or fails the test if there is none.
func Need(t testing.TB) string {
	t.Helper()
	if u := os.Getenv("HERD_ETCD_URL"); u != "" {
		return u
	}
	once.Do(func() { url, startErr = start() })
	if startErr != nil {
		SkipOrFail(t, fmt.Sprintf("no etcd server for the tests: %v", startErr))
	}
	return url
}

// Main runs the package's tests (call it from TestMain) and then stops
// the server Need started, if any.
func Main(m *testing.M) {
	code := m.Run()
	Stop()
	os.Exit(code)
}

// Stop stops the server Need started (by its pid) and removes its data.
func Stop() {
	if proc != nil && proc.Process != nil {
		_ = proc.Process.Kill()
		_ = proc.Wait()
		proc = nil
	}
	if dataDir != "" {
		_ = os.RemoveAll(dataDir)
		dataDir = ""
	}
}

// Binary returns the path of the etcd server binary, building it first if
// the cache does not hold it.
func Binary() (string, error) {
	if p := os.Getenv("HERD_ETCD_BINARY"); p != "" {
		return p, nil
	}
	home, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory for the etcd binary: %w", err)
	}
	bin := filepath.Join(home, "herd-etcd", "etcd-"+Version)
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	_, file, _, _ := runtime.Caller(0)
	src := filepath.Join(filepath.Dir(file), "..", "..", "tools", "etcdserver")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = src
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building etcd from %s: %v: %s", src, err, out)
	}
	return bin, nil
}

// FreePorts returns n distinct free loopback ports.
func FreePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// Args are the flags of one node named name listening on client and peer
// ports, its data in dir, in a cluster whose initial members are cluster
// (name=http://127.0.0.1:peer,...).
func Args(name, dir string, client, peer int, cluster string) []string {
	c := "http://127.0.0.1:" + strconv.Itoa(client)
	p := "http://127.0.0.1:" + strconv.Itoa(peer)
	return []string{
		"--name", name, "--data-dir", dir,
		"--listen-client-urls", c, "--advertise-client-urls", c,
		"--listen-peer-urls", p, "--initial-advertise-peer-urls", p,
		"--initial-cluster", cluster, "--initial-cluster-state", "new",
		"--heartbeat-interval", "10", "--election-timeout", "100",
		"--log-level", "error",
	}
}

func start() (string, error) {
	bin, err := Binary()
	if err != nil {
		return "", err
	}
	ports, err := FreePorts(2)
	if err != nil {
		return "", err
	}
	dataDir, err = os.MkdirTemp("", "herd-etcdtest-")
	if err != nil {
		return "", err
	}
	cluster := "n0=http://127.0.0.1:" + strconv.Itoa(ports[1])
	proc = exec.Command(bin, Args("n0", filepath.Join(dataDir, "n0"), ports[0], ports[1], cluster)...)
	logFile, err := os.Create(filepath.Join(dataDir, "etcd.log"))
	if err != nil {
		return "", err
	}
	defer logFile.Close()
	proc.Stdout, proc.Stderr = logFile, logFile
	if err := proc.Start(); err != nil {
		return "", fmt.Errorf("starting %s: %w", bin, err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(ports[0])
	if err := WaitHealthy(addr, 20*time.Second); err != nil {
		log, _ := os.ReadFile(logFile.Name())
		Stop()
		return "", fmt.Errorf("%w; its log:\n%s", err, log[max(len(log)-2000, 0):])
	}
	return "etcd://" + addr, nil
}

// WaitHealthy waits until the node serving clients at addr reports itself
// healthy (it has a leader and answers), for at most within.
func WaitHealthy(addr string, within time.Duration) error {
	deadline := time.Now().Add(within)
	c := &http.Client{Timeout: time.Second}
	for {
		resp, err := c.Get("http://" + addr + "/health")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && strings.Contains(string(body), `"true"`) {
				return nil
			}
			err = fmt.Errorf("status %s: %s", resp.Status, body)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("etcd at %s is not healthy after %v: %v", addr, within, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Cleanup deletes every key under prefix on the server of url (etcd://
// host:port,...) when t ends: tests that share a server leave nothing.
func Cleanup(t testing.TB, url, prefix string) {
	t.Helper()
	hosts, _, _ := strings.Cut(strings.TrimPrefix(url, "etcd://"), "?")
	var eps []string
	for _, h := range strings.Split(hosts, ",") {
		eps = append(eps, "http://"+h)
	}
	t.Cleanup(func() {
		c, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Errorf("etcd client for the clean-up: %v", err)
			return
		}
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := c.Delete(ctx, prefix, clientv3.WithPrefix()); err != nil {
			t.Errorf("deleting the test's keys under %q: %v", prefix, err)
		}
	})
}
