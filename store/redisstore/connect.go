package redisstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/herdhq/herd/store"
)

// MinServerVersion is the oldest Redis version Open accepts. The scripts
// read the server's clock (TIME) and then write, which is only allowed
// when scripts are replicated by their effects (the writes) rather than
// verbatim: the default from Redis 5.0, and from 7.0 the only mode (5.x and
// 6.x can still be switched back to verbatim replication with
// lua-replicate-commands no, which makes every script fail). go-redis v9
// supports Redis 7.0 and later, and herd is tested on 7.0. Valkey 7.2 and
// later report a compatible version.
const MinServerVersion = "7.0"

const defaultDialTimeout = 5 * time.Second

// probe dials the deployment's first addresses, one attempt each, until one
// answers, so that an unreachable host or a TLS mismatch fails Open within
// one dial timeout (go-redis' pool would retry the dial five times, and a
// command three times, before giving up).
func probe(ctx context.Context, t *target, dial func(context.Context, string, string) (net.Conn, error), timeout time.Duration) (string, error) {
	if timeout <= 0 {
		timeout = defaultDialTimeout
	}
	network := "tcp"
	if t.single != nil && t.single.Network == "unix" {
		network = "unix"
	}
	var errs []string
	for _, a := range t.addrs() {
		actx, cancel := context.WithTimeout(ctx, timeout)
		conn, err := dial(actx, network, a)
		cancel()
		if err == nil {
			_ = conn.Close()
			return a, nil
		}
		errs = append(errs, err.Error())
		if ctx.Err() != nil {
			break
		}
	}
	return "", fmt.Errorf("redisstore: connecting to %s: %w: %s", t.redacted, store.ErrUnavailable, strings.Join(errs, "; "))
}

// serverInfo is what Open checks of a server: HELLO's fields, or INFO's
// where HELLO is missing or refused.
type serverInfo struct {
	version string // "7.0.15"
	mode    string // standalone, cluster, sentinel
	role    string // master, replica
}

// hello asks c for its version, mode and role: HELLO without arguments
// (Redis 6.2+; in @connection, so an ACL user limited to its keys may run
// it), else INFO server and replication.
func hello(ctx context.Context, c infoer) (serverInfo, error) {
	var si serverInfo
	res, err := c.Do(ctx, "HELLO").Result()
	if err == nil {
		fields := map[string]string{}
		switch r := res.(type) {
		case map[any]any:
			for k, v := range r {
				ks, _ := k.(string)
				fields[ks] = fmt.Sprint(v)
			}
		case []any:
			for i := 0; i+1 < len(r); i += 2 {
				ks, _ := r[i].(string)
				fields[ks] = fmt.Sprint(r[i+1])
			}
		}
		si = serverInfo{version: fields["version"], mode: fields["mode"], role: fields["role"]}
		if si.version != "" {
			return si, nil
		}
	}
	info, ierr := c.Info(ctx, "server").Result()
	if ierr != nil {
		if err != nil {
			return si, fmt.Errorf("HELLO: %w; INFO: %w", err, ierr)
		}
		return si, ierr
	}
	si.version = infoField(info, "redis_version")
	si.mode = infoField(info, "redis_mode")
	if repl, err := c.Info(ctx, "replication").Result(); err == nil {
		si.role = infoField(repl, "role")
		if si.role == "slave" {
			si.role = "replica"
		}
	}
	return si, nil
}

func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// versionAtLeast compares dotted versions numerically ("7.0.15" >= "7.0").
func versionAtLeast(v, min string) bool {
	a, b := strings.Split(v, "."), strings.Split(min, ".")
	for i := range b {
		var x int
		if i < len(a) {
			n, err := strconv.Atoi(a[i])
			if err != nil {
				return false
			}
			x = n
		}
		y, _ := strconv.Atoi(b[i])
		if x != y {
			return x > y
		}
	}
	return true
}

// checkServer checks one server that will hold herd's keys: its version,
// that it is a primary, and that its mode matches the URL's deployment.
func checkServer(ctx context.Context, t *target, addr string, c infoer) error {
	si, err := hello(ctx, c)
	if err != nil {
		return connectErr(t, addr, err)
	}
	if si.version == "" || !versionAtLeast(si.version, MinServerVersion) {
		return fmt.Errorf("redisstore: %s at %s is version %q; herd needs Redis %s or later (its scripts read the server clock and then write, which needs scripts replicated by their effects, the only mode from 7.0): %w",
			t.kind, addr, si.version, MinServerVersion, store.ErrInvalid)
	}
	switch {
	case si.mode == "cluster" && t.kind != cluster:
		return fmt.Errorf("redisstore: %s is a Redis Cluster node: use redis+cluster://host:port[,host:port...] (rediss+cluster:// with TLS): %w", addr, store.ErrInvalid)
	case si.mode == "sentinel":
		return fmt.Errorf("redisstore: %s is a Redis Sentinel, not a data node: use redis+sentinel://host:26379[,host:port...]/mastername: %w", addr, store.ErrInvalid)
	case t.kind == cluster && si.mode != "" && si.mode != "cluster":
		return fmt.Errorf("redisstore: %s is not a Redis Cluster node (mode %s): use redis://host:port: %w", addr, si.mode, store.ErrInvalid)
	case si.role != "" && si.role != "master":
		return fmt.Errorf("redisstore: %s is a read-only %s: point the URL at the primary, or use redis+sentinel:// to follow failovers: %w", addr, si.role, store.ErrInvalid)
	}
	return nil
}

// connectErr maps an error met while Open checks the deployment.
func connectErr(t *target, addr string, err error) error {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "DB index is out of range"):
		return fmt.Errorf("redisstore: %s at %s: the database number is larger than the server's databases setting: %w", t.kind, addr, store.ErrInvalid)
	case strings.Contains(msg, "cluster support disabled"):
		return fmt.Errorf("redisstore: %s is not a Redis Cluster node: use redis://host:port: %w", addr, store.ErrInvalid)
	case isTLSAlert(err):
		// TLS 1.3: the server checks the client's certificate after the
		// client's side of the handshake is done, so a refusal arrives
		// with the first reply.
		return fmt.Errorf("redisstore: connecting to %s (%s): the server refused the TLS connection (it requires a client certificate it accepts: tls_cert and tls_key give one): %w: %w", t.redacted, addr, store.ErrUnavailable, err)
	}
	return fmt.Errorf("redisstore: connecting to %s (%s): %w: %w", t.redacted, addr, store.ErrUnavailable, err)
}

// check runs the checks of Open on a client just made for t; first is the
// address the probe reached.
func check(ctx context.Context, t *target, client redis.UniversalClient, first string) error {
	switch c := client.(type) {
	case *redis.ClusterClient:
		// The seed first, for a clear message if it is not a cluster node.
		seed := redis.NewClient(probeOptions(t, first))
		err := checkServer(ctx, t, first, seed)
		_ = seed.Close()
		if err != nil {
			return err
		}
		c.ReloadState(ctx)
		state, err := c.ClusterInfo(ctx).Result()
		if err != nil {
			return connectErr(t, first, err)
		}
		if s := infoField(state, "cluster_state"); s != "ok" {
			return fmt.Errorf("redisstore: Redis Cluster at %s: cluster_state is %q, not ok (slots unassigned or a primary down): %w", first, s, store.ErrUnavailable)
		}
		return c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
			return checkServer(ctx, t, n.Options().Addr, n)
		})
	default:
		if t.kind == sentinel {
			s := redis.NewSentinelClient(probeOptions(t, first))
			addr, err := s.GetMasterAddrByName(ctx, t.failover.MasterName).Result()
			_ = s.Close()
			if err != nil {
				if errors.Is(err, redis.Nil) || strings.Contains(err.Error(), "No such master") {
					return fmt.Errorf("redisstore: the sentinel at %s does not know a master named %q: %w", first, t.failover.MasterName, store.ErrInvalid)
				}
				if strings.Contains(strings.ToLower(err.Error()), "unknown command") {
					return fmt.Errorf("redisstore: %s is not a Redis Sentinel: use redis://host:port for a single server: %w", first, store.ErrInvalid)
				}
				return connectErr(t, first, err)
			}
			first = strings.Join(addr, ":")
		}
		return checkServer(ctx, t, first, client)
	}
}

// probeOptions are options for a one-off client of addr with t's
// credentials (the sentinel's for a sentinel), one attempt per call.
func probeOptions(t *target, addr string) *redis.Options {
	o := &redis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 1, ContextTimeoutEnabled: true}
	switch t.kind {
	case cluster:
		c := t.cluster
		o.Dialer, o.Username, o.Password, o.Protocol, o.DialTimeout = c.Dialer, c.Username, c.Password, c.Protocol, c.DialTimeout
		o.TLSConfig = c.TLSConfig
	case sentinel:
		f := t.failover
		o.Dialer, o.Username, o.Password, o.Protocol, o.DialTimeout = f.Dialer, f.SentinelUsername, f.SentinelPassword, f.Protocol, f.DialTimeout
		o.TLSConfig = f.TLSConfig
	default:
		s := t.single
		o.Network, o.Dialer, o.Username, o.Password, o.Protocol, o.DialTimeout, o.DB = s.Network, s.Dialer, s.Username, s.Password, s.Protocol, s.DialTimeout, s.DB
		o.TLSConfig = s.TLSConfig
	}
	return o
}

// defaultIOTimeout is the read and write timeout of a call whose context
// has no deadline (unless the URL sets read_timeout or write_timeout).
// go-redis' own default (5 s) also caps calls whose context allows longer:
// a member's read of a 100,000-partition group, given the session TTL,
// failed after 5 s in a Redis busy serving a fleet's joins, was made again
// from the start, and the wasted reads kept Redis busy until sessions
// expired (100 member processes placing 100,000 partitions on a loaded
// 2-core machine never placed any; docs/benchmarks.md). herd's own calls
// all carry deadlines; this bounds anyone else's.
const defaultIOTimeout = 30 * time.Second

// ioTimeouts sets the read and write timeouts the URL left unset.
func ioTimeouts(read, write *time.Duration) {
	if *read == 0 {
		*read = defaultIOTimeout
	}
	if *write == 0 {
		*write = defaultIOTimeout
	}
}

// newClient makes the go-redis client of t, with context deadlines honoured
// (up to defaultIOTimeout, unless the URL says otherwise) and the dialer
// of dial.go over base (nil: TCP).
func newClient(t *target, base dialFunc) (redis.UniversalClient, dialFunc, time.Duration) {
	switch t.kind {
	case cluster:
		o := t.cluster
		o.ContextTimeoutEnabled = true
		ioTimeouts(&o.ReadTimeout, &o.WriteTimeout)
		o.Dialer = dialer(o.DialTimeout, o.TLSConfig, base)
		return redis.NewClusterClient(o), o.Dialer, o.DialTimeout
	case sentinel:
		o := t.failover
		o.ContextTimeoutEnabled = true
		ioTimeouts(&o.ReadTimeout, &o.WriteTimeout)
		o.Dialer = dialer(o.DialTimeout, o.TLSConfig, base)
		return redis.NewFailoverClient(o), o.Dialer, o.DialTimeout
	}
	o := t.single
	o.ContextTimeoutEnabled = true
	ioTimeouts(&o.ReadTimeout, &o.WriteTimeout)
	o.Dialer = dialer(o.DialTimeout, o.TLSConfig, base)
	return redis.NewClient(o), o.Dialer, o.DialTimeout
}

// goRedisLog forwards go-redis' own log lines (pool dial failures, sentinel
// and cluster topology changes) to log/slog: failovers and topology changes
// at Info, the rest at Debug, so that an unreachable store is reported once,
// by the caller's error, not first by lines of go-redis on stderr.
type goRedisLog struct{}

func (goRedisLog) Printf(ctx context.Context, format string, v ...any) {
	msg := strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: ")
	level := slog.LevelDebug
	if strings.HasPrefix(msg, "sentinel: new master") || strings.HasPrefix(msg, "cluster: slots") {
		level = slog.LevelInfo
	}
	if ctx == nil {
		ctx = context.Background()
	}
	slog.Default().Log(ctx, level, msg, "component", "go-redis")
}

var routeLogs sync.Once

// routeGoRedisLogs installs goRedisLog as go-redis' logger, once per
// process, at the first Open. go-redis has one logger per process
// (redis.SetLogger); a program that sets its own after its first Open keeps
// its own.
func routeGoRedisLogs() {
	routeLogs.Do(func() { redis.SetLogger(goRedisLog{}) })
}

// infoer is the part of a go-redis client that hello uses.
type infoer interface {
	Do(ctx context.Context, args ...any) *redis.Cmd
	Info(ctx context.Context, section ...string) *redis.StringCmd
}

// notCluster marks a MOVED or ASK reply that reached a client that cannot
// follow it (not a *redis.ClusterClient): the URL or client names one node
// of a Redis Cluster. It is a configuration error that retrying never
// fixes, so fail maps it to store.ErrInvalid rather than ErrUnavailable.
type notCluster struct{ err error }

func (e notCluster) Error() string { return e.err.Error() }
func (e notCluster) Unwrap() error { return e.err }

// redirected wraps MOVED and ASK replies in notCluster unless the store's
// client is a cluster client.
func (s *Store) redirected(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := s.client.(*redis.ClusterClient); ok {
		return err
	}
	var rerr redis.Error
	if errors.As(err, &rerr) && hasAnyPrefix(rerr.Error(), "MOVED ", "ASK ") {
		return notCluster{err}
	}
	return err
}
