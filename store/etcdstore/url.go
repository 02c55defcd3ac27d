package etcdstore

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/herdhq/herd/store"
)

// Open connects to the etcd cluster rawURL names and checks that it
// answers:
//
//	etcd://[USER:PASSWORD@]HOST:PORT[,HOST:PORT...][?prefix=herd/]
//	etcds://...[?ca=FILE&cert=FILE&key=FILE]
//
// etcds speaks TLS: ca is the file of the CA certificates that sign the
// servers' (default: the system's), cert and key a client certificate
// and its key. Each may also come from the environment (HERD_ETCD_CA,
// HERD_ETCD_CERT, HERD_ETCD_KEY), and the password from HERD_ETCD_PASSWORD
// when the URL names a user without one. prefix is the key prefix (default
// DefaultPrefix). A port left out is 2379. A malformed URL wraps
// store.ErrInvalid, a cluster that does not answer store.ErrUnavailable;
// neither shows the password. The store dials the client's connections
// itself and replaces one on which a call failed on its deadline without
// an answer (see conn.go): a member back from a network cut reaches the
// cluster as soon as the network is back.
func Open(ctx context.Context, rawURL string, opts ...Option) (*Store, error) {
	if err := checkContext(ctx, "open"); err != nil {
		return nil, err
	}
	return open(ctx, rawURL, nil, opts...)
}

// open is Open, its connections dialled by dial (nil: from this process's
// network namespace).
func open(ctx context.Context, rawURL string, dial func(context.Context, string) (net.Conn, error), opts ...Option) (*Store, error) {
	cfg, prefix, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	cs := &conns{userTimeout: cfg.DialKeepAliveTimeout, netDial: dial}
	cfg.DialOptions = cs.dialOptions(cfg.DialTimeout)
	c, err := clientv3.New(cfg)
	if err != nil {
		cs.stop()
	}
	if errors.Is(err, rpctypes.ErrAuthFailed) || errors.Is(err, rpctypes.ErrGRPCAuthFailed) {
		return nil, fmt.Errorf("etcdstore: etcd at %s: authentication failed for user %q: %w (%v); check the user and password (HERD_ETCD_PASSWORD)",
			strings.Join(cfg.Endpoints, ","), cfg.Username, store.ErrUnavailable, err)
	}
	if err != nil {
		return nil, fmt.Errorf("etcdstore: connecting to %s: %w (%v)", strings.Join(cfg.Endpoints, ","), store.ErrUnavailable, err)
	}
	if err := probe(ctx, c, cfg, prefix); err != nil {
		_ = c.Close()
		cs.stop()
		return nil, err
	}
	if prefix != "" {
		opts = append([]Option{WithPrefix(prefix)}, opts...)
	}
	s := New(c, opts...)
	s.own, s.tls, s.conns = true, cfg.TLS, cs
	return s, nil
}

// probe reads the key prefix itself (DefaultPrefix if ""), which needs a
// leader and, with auth on, the user's read permission under prefix; on
// failure it says why, looking at the transport itself when the client saw
// only a timeout.
func probe(ctx context.Context, c *clientv3.Client, cfg clientv3.Config, prefix string) error {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	eps := strings.Join(cfg.Endpoints, ",")
	pctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	// One key, not a count of the prefix: etcd counts a range by walking
	// every key it has held there since its last compaction (on a bench
	// cluster never compacted, 18 ms of its CPU a process started).
	_, err := c.Get(withLeader(pctx), prefix, clientv3.WithKeysOnly())
	switch {
	case err == nil:
		return nil
	case errors.Is(err, rpctypes.ErrPermissionDenied):
		return fmt.Errorf("etcdstore: the etcd user %q may not read the keys under %q: %w (%v); grant its role readwrite on that prefix",
			cfg.Username, prefix, store.ErrInvalid, err)
	case errors.Is(err, rpctypes.ErrAuthFailed), errors.Is(err, rpctypes.ErrGRPCAuthFailed):
		return fmt.Errorf("etcdstore: etcd at %s: authentication failed for user %q: %w (%v); check the user and password (HERD_ETCD_PASSWORD)",
			eps, cfg.Username, store.ErrUnavailable, err)
	}
	for _, ep := range cfg.Endpoints {
		if cause := diagnose(ctx, ep, cfg.TLS); cause != "" {
			return fmt.Errorf("etcdstore: connecting to %s: %s: %w", ep, cause, store.ErrUnavailable)
		}
	}
	return fmt.Errorf("etcdstore: etcd at %s does not answer: %w (%v); check that it runs and has a leader", eps, store.ErrUnavailable, err)
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("etcdstore: etcd URL: %s: %w", fmt.Sprintf(format, args...), store.ErrInvalid)
}

// parseURL reads a store URL into the client's configuration and the key
// prefix ("" if not given).
func parseURL(raw string) (clientv3.Config, string, error) {
	cfg := clientv3.Config{DialTimeout: 5 * time.Second, Logger: zap.NewNop(), DialKeepAliveTime: 10 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second}
	scheme, rest, ok := strings.Cut(raw, "://")
	secure := strings.EqualFold(scheme, "etcds")
	if !ok || !secure && !strings.EqualFold(scheme, "etcd") {
		return cfg, "", invalid("want etcd://HOST:PORT[,HOST:PORT...] or etcds://...")
	}
	rest, rawQuery, _ := strings.Cut(rest, "?")
	rest = strings.TrimSuffix(rest, "/")
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		user, pass, hasPass := strings.Cut(rest[:at], ":")
		var err error
		if cfg.Username, err = url.PathUnescape(user); err != nil {
			return cfg, "", invalid("the user name is not escaped right")
		}
		if cfg.Password, err = url.PathUnescape(pass); err != nil {
			return cfg, "", invalid("the password is not escaped right")
		}
		if !hasPass {
			cfg.Password = os.Getenv("HERD_ETCD_PASSWORD")
		}
		rest = rest[at+1:]
	}
	if rest == "" || strings.Contains(rest, "/") {
		return cfg, "", invalid("want HOST:PORT[,HOST:PORT...] after the scheme, and no path")
	}
	for _, h := range strings.Split(rest, ",") {
		host, port, err := net.SplitHostPort(h)
		if err != nil {
			host, port = h, "2379"
		}
		if n, err := strconv.Atoi(port); host == "" || err != nil || n < 1 || n > 65535 {
			return cfg, "", invalid("an endpoint is not HOST:PORT") // not quoted: a password typed with a '?' may be in it
		}
		s := "http://"
		if secure {
			s = "https://"
		}
		cfg.Endpoints = append(cfg.Endpoints, s+net.JoinHostPort(host, port))
	}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return cfg, "", invalid("the query is malformed")
	}
	prefix := q.Get("prefix")
	for k := range q {
		switch k {
		case "prefix", "ca", "cert", "key":
		default:
			return cfg, "", invalid("unknown parameter (known: prefix, ca, cert, key)")
		}
	}
	if secure {
		if cfg.TLS, err = tlsConfig(q); err != nil {
			return cfg, "", err
		}
	} else if q.Has("ca") || q.Has("cert") || q.Has("key") {
		return cfg, "", invalid("ca, cert and key are for etcds:// (TLS)")
	}
	return cfg, prefix, nil
}

// tlsConfig reads the CA and the client certificate etcds names.
func tlsConfig(q url.Values) (*tls.Config, error) {
	param := func(k, env string) string {
		if v := q.Get(k); v != "" {
			return v
		}
		return os.Getenv(env)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca := param("ca", "HERD_ETCD_CA"); ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, invalid("reading the CA file: %v", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, invalid("the CA file holds no PEM certificate")
		}
	}
	cert, key := param("cert", "HERD_ETCD_CERT"), param("key", "HERD_ETCD_KEY")
	if (cert == "") != (key == "") {
		return nil, invalid("a client certificate needs both cert and key")
	}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, invalid("loading the client certificate: %v", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}
