package netpart

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Backends are the stores a run can use.
var Backends = []string{"redis", "postgres", "etcd"}

// pgBin is where PostgreSQL's server programs are.
var pgBin = "/usr/lib/postgresql/15/bin"

// server is a store server of the run's own.
type server struct {
	cmd  *exec.Cmd
	stop syscall.Signal // the signal that shuts it down at once
	// urlOf is the URL a member reaching the store on addr uses.
	urlOf func(addr string) string
	dir   string // removed after the server stopped ("": none)
}

func (s *server) close() {
	stopProcess(s.cmd, s.stop, 10*time.Second)
	if s.dir != "" {
		os.RemoveAll(s.dir)
	}
}

// startStore starts backend's server, bound to addrs only, and waits until
// it answers on every address.
func startStore(ctx context.Context, backend, dir string, addrs []string) (*server, error) {
	switch backend {
	case "redis":
		return startRedis(ctx, dir, addrs)
	case "postgres":
		return startPostgres(ctx, dir, addrs)
	case "etcd":
		return startEtcd(ctx, dir, addrs)
	}
	return nil, fmt.Errorf("netpart: unknown backend %q: want one of %v", backend, Backends)
}

// The ports of the store servers; they listen on the run's
// root-side addresses only, which no other run shares.
const (
	redisPort    = "6379"
	postgresPort = "5432"
)

func startRedis(ctx context.Context, dir string, addrs []string) (*server, error) {
	args := []string{"--port", redisPort, "--bind"}
	args = append(args, addrs...)
	args = append(args, "--save", "", "--appendonly", "no", "--dir", dir, "--protected-mode", "no",
		"--logfile", filepath.Join(dir, "redis.log"))
	s := &server{cmd: exec.Command("redis-server", args...), stop: syscall.SIGTERM,
		urlOf: func(a string) string { return "redis://" + net.JoinHostPort(a, redisPort) + "/0" }}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("netpart: start redis-server: %w", err)
	}
	for _, a := range addrs {
		if err := waitDial(ctx, net.JoinHostPort(a, redisPort), 10*time.Second); err != nil {
			s.close()
			return nil, err
		}
	}
	return s, nil
}

// startPostgres makes a cluster of its own (initdb, as the postgres user,
// in a directory of its own, trust authentication from the run's subnets
// only) and starts it on addrs. Its log goes to logDir/postgres.log, one
// line per connection's end, stamped in UTC with the backend's pid,
// client address and application_name (PgLogLinePrefix; ReadTieEnds reads
// it).
func startPostgres(ctx context.Context, logDir string, addrs []string) (*server, error) {
	cred, err := postgresUser()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "herd-netpart-pg-")
	if err != nil {
		return nil, fmt.Errorf("netpart: postgres dir: %w", err)
	}
	if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("netpart: postgres dir: %w", err)
	}
	data := filepath.Join(dir, "data")
	initdb := exec.CommandContext(ctx, filepath.Join(pgBin, "initdb"), "-D", data, "-U", "postgres", "-A", "trust", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("netpart: initdb: %w: %s", err, strings.TrimSpace(string(out)))
	}
	hba := "host all postgres 10.213.0.0/16 trust\n"
	if err := appendFile(filepath.Join(data, "pg_hba.conf"), hba); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	cmd := exec.Command(filepath.Join(pgBin, "postgres"), "-D", data, "-p", postgresPort,
		"-c", "listen_addresses="+strings.Join(addrs, ","), "-c", "unix_socket_directories="+dir,
		"-c", "fsync=off", "-c", "max_connections=60", "-c", "logging_collector=off",
		"-c", "log_disconnections=on", "-c", "log_timezone=UTC", "-c", "log_line_prefix="+pgLogLinePrefix)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	logf, err := os.Create(filepath.Join(logDir, "postgres.log"))
	if err == nil {
		cmd.Stdout, cmd.Stderr = logf, logf
		defer logf.Close()
	}
	s := &server{cmd: cmd, stop: syscall.SIGINT, dir: dir,
		urlOf: func(a string) string {
			return "postgres://postgres@" + net.JoinHostPort(a, postgresPort) + "/postgres?sslmode=disable"
		}}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("netpart: start postgres: %w", err)
	}
	for _, a := range addrs {
		if err := waitReady(ctx, a); err != nil {
			s.close()
			return nil, err
		}
	}
	return s, nil
}

func postgresUser() (*syscall.Credential, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("netpart: the postgres user: %w", err)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("netpart: the postgres user has uid %q, gid %q", u.Uid, u.Gid)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func appendFile(path, text string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("netpart: %w", err)
	}
	_, err = f.WriteString(text)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("netpart: %s: %w", path, err)
	}
	return nil
}

// waitReady waits until PostgreSQL on addr accepts connections (it listens
// before it has finished starting up).
func waitReady(ctx context.Context, addr string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := exec.CommandContext(ctx, filepath.Join(pgBin, "pg_isready"), "-q", "-h", addr, "-p", postgresPort, "-U", "postgres").Run()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("netpart: postgres on %s not ready within 30s: %w", addr, err)
		}
		if err := hold(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

func waitDial(ctx context.Context, addr string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		d := net.Dialer{Timeout: 200 * time.Millisecond}
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			return c.Close()
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("netpart: store at %s not reachable within %v: %w", addr, within, err)
		}
		if err := hold(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
}
