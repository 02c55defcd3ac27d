package pgtest

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/herdhq/herd/internal/testcerts"
)

// TLSServer is a PostgreSQL instance of the test's own: initdb into a
// temporary directory, then postgres on a free loopback port with ssl=on
// and the test's server certificate, no Unix socket, and a pg_hba.conf of
// hostssl lines with scram-sha-256 only. As root, it runs as the user
// postgres (PostgreSQL refuses root). It is stopped, by its pid, when the
// test ends, and its directory removed.
type TLSServer struct {
	Port      int
	Certs     *testcerts.Set
	AdminPass string // of the superuser herd_admin
	dir       string
	cred      *syscall.Credential
	cmd       *exec.Cmd
	exit      chan struct{}
}

// binDir finds initdb and postgres: HERD_PG_BIN, the newest
// /usr/lib/postgresql/*/bin, or PATH.
func binDir() (string, error) {
	if d := os.Getenv("HERD_PG_BIN"); d != "" {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err != nil {
			return "", fmt.Errorf("HERD_PG_BIN=%s: no initdb there (%v)", d, err)
		}
		return d, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return vb - va
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	p, err := exec.LookPath("initdb")
	if err != nil {
		return "", fmt.Errorf("initdb not found in HERD_PG_BIN, /usr/lib/postgresql/*/bin or PATH")
	}
	return filepath.Dir(p), nil
}

// StartTLSServer initdbs and starts a TLSServer. Without the PostgreSQL
// binaries the test is skipped, or fails with HERD_REQUIRE_SERVERS=1.
func StartTLSServer(t testing.TB, certs *testcerts.Set) *TLSServer {
	t.Helper()
	bin, err := binDir()
	if err != nil {
		skipOrFail(t, err.Error())
	}
	s := &TLSServer{Certs: certs, AdminPass: "admin-" + rand8(), exit: make(chan struct{})}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			skipOrFail(t, "running as root, and there is no user postgres to run PostgreSQL as: "+err.Error())
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	// Not t.TempDir: the user postgres must reach it.
	if s.dir, err = os.MkdirTemp("", "herd-pgtls-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(s.dir) })
	s.writeFile(t, "pwfile", s.AdminPass+"\n", 0o600)
	s.run(t, filepath.Join(bin, "initdb"), "-D", s.data(), "-U", "herd_admin", "--pwfile", filepath.Join(s.dir, "pwfile"),
		"--auth", "scram-sha-256", "--no-sync", "--no-instructions", "-E", "UTF8", "--locale", "C")
	s.writeFile(t, "data/pg_hba.conf", "hostssl all all 127.0.0.1/32 scram-sha-256\nhostssl all all ::1/128 scram-sha-256\n", 0o600)
	// ssl and the certificate files in postgresql.conf, not on the command
	// line (which would override ALTER SYSTEM: UseCert, WithoutTLS).
	conf, err := os.ReadFile(filepath.Join(s.data(), "postgresql.conf"))
	if err != nil {
		t.Fatal(err)
	}
	s.writeFile(t, "data/postgresql.conf", string(conf)+"\nssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\n", 0o600)
	s.InstallCert(t, certs.ServerCert, certs.ServerKey, "server")
	s.InstallCert(t, certs.ExpiredCert, certs.ExpiredKey, "expired")

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.Port = l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	s.cmd = exec.Command(filepath.Join(bin, "postgres"), "-D", s.data(), "-p", strconv.Itoa(s.Port),
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=",
		"-c", "password_encryption=scram-sha-256",
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off", "-c", "max_connections=200")
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	s.cmd.Stderr = &tail{}
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("starting postgres: %v", err)
	}
	cmd, exit := s.cmd, s.exit
	go func() { _ = cmd.Wait(); close(exit) }()
	t.Cleanup(s.stop)
	s.waitReady(t)
	return s
}

func (s *TLSServer) data() string { return filepath.Join(s.dir, "data") }

// run runs a command as the server's user and fails the test if it fails.
func (s *TLSServer) run(t testing.TB, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	cmd.Dir = s.dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", filepath.Base(name), err, out)
	}
}

// writeFile writes a file under the server's directory, owned by the
// server's user (PostgreSQL refuses a key file it does not own).
func (s *TLSServer) writeFile(t testing.TB, name, content string, mode os.FileMode) {
	t.Helper()
	p := filepath.Join(s.dir, name)
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{s.dir, p} {
		if s.cred != nil {
			if err := os.Chown(q, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// InstallCert copies a certificate and its key into the data directory as
// name.crt and name.key; UseCert makes the server present them.
func (s *TLSServer) InstallCert(t testing.TB, cert, key, name string) {
	t.Helper()
	for _, f := range []struct{ from, to string }{{cert, name + ".crt"}, {key, name + ".key"}} {
		b, err := os.ReadFile(f.from)
		if err != nil {
			t.Fatal(err)
		}
		s.writeFile(t, "data/"+f.to, string(b), 0o600)
	}
}

// UseCert makes the server present name.crt (see InstallCert) to new
// connections, by ALTER SYSTEM and a configuration reload.
func (s *TLSServer) UseCert(t testing.TB, name string) {
	t.Helper()
	s.Admin(t, "ALTER SYSTEM SET ssl_cert_file = '"+name+".crt'")
	s.Admin(t, "ALTER SYSTEM SET ssl_key_file = '"+name+".key'")
	s.Admin(t, "SELECT pg_reload_conf()")
	// The postmaster reloads its configuration, and its TLS context with
	// it, when the signal arrives: wait until a new connection's backend
	// (forked after the reload) reports the new file.
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var got string
		conn, err := pgx.Connect(ctx, s.adminURL())
		if err == nil {
			err = conn.QueryRow(ctx, "SELECT current_setting('ssl_cert_file')").Scan(&got)
			_ = conn.Close(ctx)
		}
		cancel()
		if got == name+".crt" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server does not present %s.crt after a reload (ssl_cert_file %q, %v)", name, got, err)
		}
		time.Sleep(20 * time.Millisecond) // the reload signal is on its way: poll
	}
}

// WithoutTLS turns TLS off on the server (ssl=off, and pg_hba.conf
// accepting plaintext connections too) until the test ends, when it turns
// it back on: a server that refuses TLS, as one never configured for it.
func (s *TLSServer) WithoutTLS(t testing.TB) {
	t.Helper()
	const hostssl = "hostssl all all 127.0.0.1/32 scram-sha-256\nhostssl all all ::1/128 scram-sha-256\n"
	s.writeFile(t, "data/pg_hba.conf", hostssl+"host all all 127.0.0.1/32 scram-sha-256\nhost all all ::1/128 scram-sha-256\n", 0o600)
	s.Admin(t, "SELECT pg_reload_conf()")
	s.Admin(t, "ALTER SYSTEM SET ssl = off")
	s.Admin(t, "SELECT pg_reload_conf()")
	s.waitSSL(t, "off")
	t.Cleanup(func() {
		s.adminExec(t, s.plainAdminURL(), "ALTER SYSTEM RESET ssl")
		s.adminExec(t, s.plainAdminURL(), "SELECT pg_reload_conf()")
		s.waitSSL(t, "on")
		s.writeFile(t, "data/pg_hba.conf", hostssl, 0o600)
		s.Admin(t, "SELECT pg_reload_conf()")
	})
}

// waitSSL waits until a new connection's backend (forked after a reload)
// reports ssl as want.
func (s *TLSServer) waitSSL(t testing.TB, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var got string
		conn, err := pgx.Connect(ctx, s.plainAdminURL())
		if err == nil {
			err = conn.QueryRow(ctx, "SELECT current_setting('ssl')").Scan(&got)
			_ = conn.Close(ctx)
		}
		cancel()
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server's ssl is %q after a reload, want %q (%v)", got, want, err)
		}
		time.Sleep(20 * time.Millisecond) // the reload signal is on its way: poll
	}
}

// plainAdminURL is herd_admin's URL with sslmode=prefer: TLS when the
// server offers it, plaintext when not (WithoutTLS).
func (s *TLSServer) plainAdminURL() string {
	return strings.Replace(s.adminURL(), "sslmode=require", "sslmode=prefer", 1)
}

// adminExec runs one statement on url.
func (s *TLSServer) adminExec(t testing.TB, url, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("%s: connecting as herd_admin: %v", sql, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// URL is the postgres:// URL of user and password for database db,
// verifying the server against ca (sslmode=verify-full).
func (s *TLSServer) URL(user, password, db, ca string) string {
	q := url.Values{"sslmode": {"verify-full"}, "sslrootcert": {ca}, "connect_timeout": {"5"}}
	return "postgres://" + escapeAll(user) + ":" + escapeAll(password) + "@127.0.0.1:" + strconv.Itoa(s.Port) + "/" + db + "?" + q.Encode()
}

// Admin runs one statement as the superuser herd_admin on database
// postgres, over verified TLS. It runs on whatever certificate the server
// presents now, trusting the test's CA only.
func (s *TLSServer) Admin(t testing.TB, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.adminURL())
	if err != nil {
		t.Fatalf("%s: connecting as herd_admin: %v", sql, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// adminURL is herd_admin's URL with sslmode=require and no sslrootcert:
// encrypted, but whatever certificate the server presents (UseCert may
// have made it the expired one).
func (s *TLSServer) adminURL() string {
	return "postgres://herd_admin:" + escapeAll(s.AdminPass) + "@127.0.0.1:" + strconv.Itoa(s.Port) + "/postgres?sslmode=require&connect_timeout=5"
}

func (s *TLSServer) waitReady(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgx.Connect(ctx, s.URL("herd_admin", s.AdminPass, "postgres", s.Certs.CA))
		if err == nil {
			_ = conn.Close(ctx)
			cancel()
			return
		}
		cancel()
		select {
		case <-s.exit:
			t.Fatalf("postgres on port %d exited before answering: %s", s.Port, s.cmd.Stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("postgres on port %d does not answer: %v\n%s", s.Port, err, s.cmd.Stderr)
		}
		time.Sleep(20 * time.Millisecond) // the process is starting: poll its port
	}
}

// stop asks the server for a fast shutdown (SIGINT) by its pid, and kills
// it if it has not exited within 30 s.
func (s *TLSServer) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.exit:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exit
	}
}

// tail keeps the last 4 KiB of the server's log, for messages.
type tail struct {
	mu sync.Mutex
	b  []byte
}

func (w *tail) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b = append(w.b, p...)
	if len(w.b) > 4096 {
		w.b = w.b[len(w.b)-4096:]
	}
	return len(p), nil
}

func (w *tail) String() string { w.mu.Lock(); defer w.mu.Unlock(); return string(w.b) }

// escapeAll percent-encodes every byte but ASCII letters and digits: a
// user name or password in a URL's user info.
func escapeAll(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}
