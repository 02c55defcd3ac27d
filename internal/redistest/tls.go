package redistest

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/herdhq/herd/internal/testcerts"
)

// TLSServer is a redis-server child process on a free loopback port that
// speaks TLS only (port 0, tls-port), requires a client certificate signed
// by the test's CA (tls-auth-clients yes), and keeps nothing on disk. The
// default user has no password: only a client with the CA's certificate
// reaches it. It is killed, by its pid, when the test ends, and its
// directory removed.
type TLSServer struct {
	Port  int
	Certs *testcerts.Set
	cmd   *exec.Cmd
	exit  chan struct{}
}

// StartTLSServer starts a TLSServer presenting cert and key (files of
// certs). Without redis-server on PATH the test is skipped or fails (see
// SkipOrFail).
func StartTLSServer(t testing.TB, certs *testcerts.Set, cert, key string) *TLSServer {
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
	s := &TLSServer{Port: port, Certs: certs, exit: make(chan struct{})}
	s.cmd = exec.Command(path, "--port", "0", "--tls-port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-cert-file", certs.CA,
		"--tls-auth-clients", "yes", "--save", "", "--appendonly", "no", "--daemonize", "no",
		"--dir", t.TempDir(), "--loglevel", "warning")
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("starting redis-server: %v", err)
	}
	cmd, exit := s.cmd, s.exit
	go func() { _ = cmd.Wait(); close(exit) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exit })

	// Wait for the port to answer, checking nothing of the certificate (it
	// may be the expired one on purpose).
	c := s.client(t, true)
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return s
		}
		select {
		case <-exit:
			t.Fatalf("redis-server (TLS) on port %d exited before answering", port)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server (TLS) on port %d does not answer: %v", port, err)
		}
		time.Sleep(10 * time.Millisecond) // the process is starting: poll its port
	}
}

// Addr is the server's host:port.
func (s *TLSServer) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.Port) }

// Admin returns a client of the default user (every permission), with the
// client certificate, verifying the server; closed when t ends.
func (s *TLSServer) Admin(t testing.TB) *redis.Client {
	t.Helper()
	c := s.client(t, false)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func (s *TLSServer) client(t testing.TB, skipVerify bool) *redis.Client {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(s.Certs.ClientCert, s.Certs.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	roots, err := testcerts.Pool(s.Certs.CA)
	if err != nil {
		t.Fatal(err)
	}
	return redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, TLSConfig: &tls.Config{
		ServerName: "127.0.0.1", RootCAs: roots, Certificates: []tls.Certificate{cert},
		InsecureSkipVerify: skipVerify, MinVersion: tls.VersionTLS12,
	}})
}
