package proctest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The test finds Redis through HERD_REDIS_URL (default
// redis://127.0.0.1:6379/0). If it does not answer the test is skipped,
// unless HERD_REQUIRE_SERVERS=1, when it fails. Every subtest uses its own
// random key prefix and deletes its keys when it ends.

const defaultRedisURL = "redis://127.0.0.1:6379/0"

func redisURL() string {
	if u := os.Getenv("HERD_REDIS_URL"); u != "" {
		return u
	}
	return defaultRedisURL
}

func requireServers() bool { return os.Getenv("HERD_REQUIRE_SERVERS") == "1" }

// skipOrFail skips the test with msg, or fails it if HERD_REQUIRE_SERVERS=1.
func skipOrFail(t testing.TB, msg string) {
	t.Helper()
	if requireServers() {
		t.Fatalf("%s; HERD_REQUIRE_SERVERS=1, so this is a failure", msg)
	}
	t.Skipf("%s; skipping (set HERD_REQUIRE_SERVERS=1 to fail instead)", msg)
}

// needRedis checks that the Redis of HERD_REDIS_URL answers and returns a
// raw client to it.
func needRedis(t testing.TB) *redis.Client {
	t.Helper()
	opt, err := redis.ParseURL(redisURL())
	if err != nil {
		t.Fatalf("HERD_REDIS_URL %q: %v", redisURL(), err)
	}
	o := *opt
	o.MaxRetries = -1
	probe := redis.NewClient(&o)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	err = probe.Ping(ctx).Err()
	cancel()
	_ = probe.Close()
	if err != nil {
		skipOrFail(t, fmt.Sprintf("Redis at %s (env HERD_REDIS_URL) is not reachable: %v", redisURL(), err))
	}
	c := redis.NewClient(opt)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// testPrefix returns a key prefix no other test or run uses, and deletes
// every key under it on raw when t ends.
func testPrefix(t testing.TB, raw *redis.Client) string {
	t.Helper()
	p := "herdproctest-" + randomHex(6)
	t.Cleanup(func() { deletePrefix(t, raw, p) })
	return p
}

func deletePrefix(t testing.TB, raw *redis.Client, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	iter := raw.Scan(ctx, 0, prefix+":*", 1000).Iterator()
	var batch []string
	for iter.Next(ctx) {
		batch = append(batch, iter.Val())
		if len(batch) == 500 {
			raw.Unlink(ctx, batch...)
			batch = batch[:0]
		}
	}
	if len(batch) > 0 {
		raw.Unlink(ctx, batch...)
	}
	if err := iter.Err(); err != nil {
		t.Logf("cleaning up keys %s:*: %v", prefix, err)
	}
}

// withHost returns rawURL (a redis:// URL) pointing at addr instead, with
// the same credentials and database.
func withHost(t testing.TB, rawURL, addr string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatalf("parsing %q: %v", rawURL, err)
	}
	u.Host = addr
	return u.String()
}

// redisAddr is the host:port of a redis:// URL.
func redisAddr(t testing.TB, rawURL string) string {
	t.Helper()
	opt, err := redis.ParseURL(rawURL)
	if err != nil {
		t.Fatalf("parsing %q: %v", rawURL, err)
	}
	return opt.Addr
}

// tempServer is a redis-server child process on a free loopback port,
// without persistence, that a test can kill and restart (empty).
type tempServer struct {
	t    testing.TB
	path string
	port int
	cmd  *exec.Cmd
	exit chan struct{}
}

func startTempServer(t testing.TB) *tempServer {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		skipOrFail(t, fmt.Sprintf("redis-server is not on PATH (%v)", err))
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	ts := &tempServer{t: t, path: path, port: port}
	ts.start()
	t.Cleanup(ts.kill)
	return ts
}

func (ts *tempServer) url() string { return "redis://127.0.0.1:" + strconv.Itoa(ts.port) + "/0" }

func (ts *tempServer) start() {
	ts.t.Helper()
	ts.cmd = exec.Command(ts.path, "--port", strconv.Itoa(ts.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--dir", ts.t.TempDir(),
		"--loglevel", "warning")
	if err := ts.cmd.Start(); err != nil {
		ts.t.Fatalf("starting redis-server: %v", err)
	}
	ts.exit = make(chan struct{})
	cmd, exit := ts.cmd, ts.exit
	go func() { _ = cmd.Wait(); close(exit) }()
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(ts.port), MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			ts.t.Fatalf("redis-server on port %d does not answer: %v", ts.port, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// kill stops the server with SIGKILL and waits for it to exit.
func (ts *tempServer) kill() {
	if ts.cmd == nil || ts.cmd.Process == nil {
		return
	}
	_ = ts.cmd.Process.Kill()
	<-ts.exit
	ts.cmd = nil
}
