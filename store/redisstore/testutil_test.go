package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"herd/store"
)

// Test helpers. The tests find Redis through HERD_REDIS_URL (default
// redis://127.0.0.1:6379/0). If it does not answer they are skipped, unless
// HERD_REQUIRE_SERVERS=1, when they fail. Every test uses its own random key
// prefix and deletes its keys when it ends, so runs can share a server.

const defaultTestURL = "redis://127.0.0.1:6379/0"

func testURL() string {
	if u := os.Getenv("HERD_REDIS_URL"); u != "" {
		return u
	}
	return defaultTestURL
}

var (
	probeOnce sync.Once
	probeErr  error
)

// needRedis returns a raw client to the test server, or skips (fails, with
// HERD_REQUIRE_SERVERS=1) the test if it cannot be reached. The server is
// probed once per test binary.
func needRedis(t testing.TB) *redis.Client {
	t.Helper()
	opt, err := redis.ParseURL(testURL())
	if err != nil {
		t.Fatalf("HERD_REDIS_URL %q: %v", testURL(), err)
	}
	probeOnce.Do(func() {
		o := *opt
		o.MaxRetries = -1
		c := redis.NewClient(&o)
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		probeErr = c.Ping(ctx).Err()
	})
	if probeErr != nil {
		msg := fmt.Sprintf("Redis at %s (env HERD_REDIS_URL) is not reachable: %v", testURL(), probeErr)
		if os.Getenv("HERD_REQUIRE_SERVERS") == "1" {
			t.Fatalf("%s; HERD_REQUIRE_SERVERS=1, so this is a failure", msg)
		}
		t.Skipf("%s; skipping (set HERD_REQUIRE_SERVERS=1 to fail instead)", msg)
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
// every key under it when t ends.
func testPrefix(t testing.TB, raw *redis.Client) string {
	t.Helper()
	p := "herdtest-" + randomHex(6)
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

// newTestStore opens a Store on the test server with a fresh prefix.
func newTestStore(t testing.TB) (*Store, *redis.Client) {
	t.Helper()
	raw := needRedis(t)
	s := openWithPrefix(t, testPrefix(t, raw))
	return s, raw
}

func openWithPrefix(t testing.TB, prefix string) *Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := Open(ctx, testURL(), WithPrefix(prefix))
	if err != nil {
		t.Fatalf("Open(%s): %v", testURL(), err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// serverMicros is the server's clock in µs.
func serverMicros(t testing.TB, c *redis.Client) uint64 {
	t.Helper()
	tm, err := c.Time(context.Background()).Result()
	if err != nil {
		t.Fatalf("TIME: %v", err)
	}
	return uint64(tm.UnixMicro())
}

func wantIs(t testing.TB, err, target error, what string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v; want %v", what, err, target)
	}
}

func must(t testing.TB, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// tempServer is a redis-server child process on a free loopback port,
// without persistence, that a test can restart (empty).
type tempServer struct {
	t    testing.TB
	port int
	cmd  *exec.Cmd
	exit chan struct{}
}

func startTempServer(t testing.TB) *tempServer {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("HERD_REQUIRE_SERVERS") == "1" {
			t.Fatalf("redis-server is not on PATH: %v", err)
		}
		t.Skipf("redis-server is not on PATH (%v); skipping", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	ts := &tempServer{t: t, port: port}
	ts.start(path)
	t.Cleanup(ts.stop)
	return ts
}

func (ts *tempServer) url() string { return "redis://127.0.0.1:" + strconv.Itoa(ts.port) + "/0" }

func (ts *tempServer) start(path string) {
	ts.t.Helper()
	dir := ts.t.TempDir()
	ts.cmd = exec.Command(path, "--port", strconv.Itoa(ts.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--dir", dir, "--loglevel", "warning")
	if err := ts.cmd.Start(); err != nil {
		ts.t.Fatalf("starting redis-server: %v", err)
	}
	ts.exit = make(chan struct{})
	cmd, exit := ts.cmd, ts.exit
	go func() { _ = cmd.Wait(); close(exit) }()
	// Wait until it answers.
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
		time.Sleep(20 * time.Millisecond)
	}
}

func (ts *tempServer) stop() {
	if ts.cmd == nil || ts.cmd.Process == nil {
		return
	}
	_ = ts.cmd.Process.Kill()
	<-ts.exit
	ts.cmd = nil
}

// restart kills the server and starts it again on the same port, empty.
func (ts *tempServer) restart() {
	ts.t.Helper()
	path := ts.cmd.Path
	ts.stop()
	ts.start(path)
}

// checkStore asserts s implements store.Store (at compile time as well).
var _ store.Store = (*Store)(nil)
