package etcdtest

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/herdhq/herd/internal/testcerts"
)

// TLSServer is a single-node etcd of one test's own that serves clients
// over TLS only and requires a client certificate signed by the test's CA
// (--client-cert-auth).
type TLSServer struct {
	Port  int
	Certs *testcerts.Set
}

// Addr is the server's client address, host:port.
func (s *TLSServer) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.Port) }

// StartTLS starts a TLS-only etcd with the server certificate cert and
// its key (the expired one, for a test of that), trusting certs.CA for
// client certificates; killed and its data removed when t ends.
func StartTLS(t testing.TB, certs *testcerts.Set, cert, key string) *TLSServer {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		SkipOrFail(t, fmt.Sprintf("no etcd binary for a TLS server: %v", err))
	}
	ports, err := FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	c := "https://127.0.0.1:" + strconv.Itoa(ports[0])
	args := Args("n0", filepath.Join(dir, "n0"), ports[0], ports[1], "n0=http://127.0.0.1:"+strconv.Itoa(ports[1]))
	for i, a := range args {
		if a == "--listen-client-urls" || a == "--advertise-client-urls" {
			args[i+1] = c
		}
	}
	args = append(args, "--cert-file", cert, "--key-file", key, "--trusted-ca-file", certs.CA, "--client-cert-auth")
	cmd := exec.Command(bin, args...)
	logFile, err := os.Create(filepath.Join(dir, "etcd.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting etcd (TLS): %v", err)
	}
	_ = logFile.Close()
	exit := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exit) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exit })
	s := &TLSServer{Port: ports[0], Certs: certs}
	if err := s.waitHealthy(exit, 20*time.Second); err != nil {
		log, _ := os.ReadFile(logFile.Name())
		t.Fatalf("%v; its log:\n%s", err, log[max(len(log)-2000, 0):])
	}
	return s
}

// waitHealthy polls /health with the client certificate, checking nothing
// of the server's (it may be the expired one on purpose).
func (s *TLSServer) waitHealthy(exit <-chan struct{}, within time.Duration) error {
	pair, err := tls.LoadX509KeyPair(s.Certs.ClientCert, s.Certs.ClientKey)
	if err != nil {
		return err
	}
	c := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		InsecureSkipVerify: true, Certificates: []tls.Certificate{pair}}}} //nolint:gosec // a readiness poll only
	defer c.CloseIdleConnections()
	deadline := time.Now().Add(within)
	for {
		resp, err := c.Get("https://" + s.Addr() + "/health")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && strings.Contains(string(body), `"true"`) {
				return nil
			}
			err = fmt.Errorf("status %s: %s", resp.Status, body)
		}
		select {
		case <-exit:
			return fmt.Errorf("etcd (TLS) on %s exited before it was healthy", s.Addr())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("etcd (TLS) on %s is not healthy after %v: %v", s.Addr(), within, err)
		}
		time.Sleep(20 * time.Millisecond) // the process is starting: poll its port
	}
}

// Admin returns a client with the client certificate, verifying the
// server against certs.CA, and the root user's password if auth is on
// (pass ""); closed when t ends.
func (s *TLSServer) Admin(t testing.TB, user, pass string) *clientv3.Client {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(s.Certs.ClientCert, s.Certs.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := testcerts.Pool(s.Certs.CA)
	if err != nil {
		t.Fatal(err)
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{"https://" + s.Addr()}, DialTimeout: 5 * time.Second,
		Logger: zap.NewNop(), Username: user, Password: pass,
		TLS: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}})
	if err != nil {
		t.Fatalf("etcd admin client: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// EnableAuth adds the user root (role root) with password rootPass and a
// user named user with password pass whose role may read and write the
// keys under prefix, then turns authentication on.
func (s *TLSServer) EnableAuth(t testing.TB, rootPass, user, pass, prefix string) {
	t.Helper()
	c := s.Admin(t, "", "")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	steps := []func() error{
		func() error { _, err := c.UserAdd(ctx, "root", rootPass); return err },
		func() error { _, err := c.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := c.RoleAdd(ctx, "herd"); return err },
		func() error {
			_, err := c.RoleGrantPermission(ctx, "herd", prefix, clientv3.GetPrefixRangeEnd(prefix), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := c.UserAdd(ctx, user, pass); return err },
		func() error { _, err := c.UserGrantRole(ctx, user, "herd"); return err },
		func() error { _, err := c.AuthEnable(ctx); return err },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("enabling etcd auth, step %d: %v", i, err)
		}
	}
}
