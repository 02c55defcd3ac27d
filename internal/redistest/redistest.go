// Package redistest is what the tests that need Redis share: finding the
// server, skipping (or failing, in CI) when it is unreachable, a key prefix
// per test, and a disposable redis-server on a free loopback port.
//
// Tests find Redis through HERD_REDIS_URL (default redis://127.0.0.1:6379/0).
// If it does not answer they are skipped, unless HERD_REQUIRE_SERVERS=1, when
// they fail.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultURL is the server tests use when HERD_REDIS_URL is not set.
const DefaultURL = "redis://127.0.0.1:6379/0"

// URL is the test server's URL: HERD_REDIS_URL, or DefaultURL.
func URL() string {
	if u := os.Getenv("HERD_REDIS_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// SkipOrFail skips the test with msg, or fails it if HERD_REQUIRE_SERVERS=1.
func SkipOrFail(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("HERD_REQUIRE_SERVERS") == "1" {
		t.Fatalf("%s; HERD_REQUIRE_SERVERS=1, so this is a failure", msg)
	}
	t.Skipf("%s; skipping (set HERD_REQUIRE_SERVERS=1 to fail instead)", msg)
}

// Need checks that the server of URL answers (or skips or fails the test,
// see SkipOrFail) and returns a raw client to it, closed when t ends.
func Need(t testing.TB) *redis.Client {
	t.Helper()
	opt, err := redis.ParseURL(URL())
	if err != nil {
		t.Fatalf("HERD_REDIS_URL %q: %v", URL(), err)
	}
	o := *opt
	o.MaxRetries = -1
	probe := redis.NewClient(&o)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	err = probe.Ping(ctx).Err()
	cancel()
	_ = probe.Close()
	if err != nil {
		SkipOrFail(t, fmt.Sprintf("Redis at %s (env HERD_REDIS_URL) is not reachable: %v", URL(), err))
	}
	c := redis.NewClient(opt)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// RandomHex returns n random bytes in hex.
func RandomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Prefix returns a key prefix, starting with name, that no other test or
// run uses, and deletes every key under it on raw when t ends.
func Prefix(t testing.TB, raw *redis.Client, name string) string {
	t.Helper()
	p := name + "-" + RandomHex(6)
	t.Cleanup(func() { DeletePrefix(t, raw, p) })
	return p
}

// DeletePrefix deletes every key under prefix+":".
func DeletePrefix(t testing.TB, raw *redis.Client, prefix string) {
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

// Server is a redis-server child process on a free loopback port, without
// persistence, that a test can kill and start again (empty).
type Server struct {
	t    testing.TB
	path string
	Port int
	cmd  *exec.Cmd
	exit chan struct{}
}

// StartServer starts a Server, killed when t ends. Without redis-server on
// PATH the test is skipped or fails (see SkipOrFail).
func StartServer(t testing.TB) *Server {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		SkipOrFail(t, fmt.Sprintf("redis-server is not on PATH (%v)", err))
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	s := &Server{t: t, path: path, Port: port}
	s.Start()
	t.Cleanup(s.Kill)
	return s
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.Port) }

// URL is the server's redis:// URL, database 0.
func (s *Server) URL() string { return "redis://" + s.Addr() + "/0" }

// Start starts the server (again, empty, after Kill) and waits until it
// answers.
func (s *Server) Start() {
	s.t.Helper()
	s.cmd = exec.Command(s.path, "--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--dir", s.t.TempDir(),
		"--loglevel", "warning")
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("starting redis-server: %v", err)
	}
	s.exit = make(chan struct{})
	cmd, exit := s.cmd, s.exit
	go func() { _ = cmd.Wait(); close(exit) }()
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
		select {
		case <-exit:
			s.t.Fatalf("redis-server on port %d exited before answering", s.Port)
		default:
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("redis-server on port %d does not answer: %v", s.Port, err)
		}
		time.Sleep(10 * time.Millisecond) // the process is starting: poll its port
	}
}

// Kill stops the server with SIGKILL and waits for it to exit.
func (s *Server) Kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exit
	s.cmd = nil
}

// Restart kills the server and starts it again on the same port, empty.
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	s.Start()
}
