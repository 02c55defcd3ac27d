package redisstore

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/herdhq/herd/store"
)

// deployment is the kind of Redis deployment a store URL names.
type deployment int

const (
	single   deployment = iota // one server: redis://, rediss://, unix://
	cluster                    // Redis Cluster: redis+cluster://, rediss+cluster://
	sentinel                   // primary and replicas behind Sentinel: redis+sentinel://, rediss+sentinel://
)

func (d deployment) String() string {
	switch d {
	case cluster:
		return "Redis Cluster"
	case sentinel:
		return "Redis Sentinel"
	}
	return "Redis server"
}

// schemes maps every URL scheme Open accepts to its deployment and whether
// it speaks TLS.
var schemes = map[string]struct {
	kind deployment
	tls  bool
}{
	"redis":           {single, false},
	"rediss":          {single, true},
	"unix":            {single, false},
	"redis+cluster":   {cluster, false},
	"rediss+cluster":  {cluster, true},
	"redis+sentinel":  {sentinel, false},
	"rediss+sentinel": {sentinel, true},
}

const schemeList = "redis://, rediss://, unix://, redis+cluster://, rediss+cluster://, redis+sentinel:// or rediss+sentinel://"

// target is a parsed store URL: the go-redis options of one deployment.
type target struct {
	kind     deployment
	prefix   string // "" when the URL has no prefix parameter
	redacted string // the URL without secrets, for messages
	single   *redis.Options
	cluster  *redis.ClusterOptions
	failover *redis.FailoverOptions
}

// addrs are the addresses Open probes first: the server, the cluster's seed
// nodes, or the sentinels.
func (t *target) addrs() []string {
	switch t.kind {
	case cluster:
		return t.cluster.Addrs
	case sentinel:
		return t.failover.SentinelAddrs
	}
	return []string{t.single.Addr}
}

func invalid(redacted, format string, args ...any) error {
	if redacted == "" {
		return fmt.Errorf("redisstore: Redis URL: %s: %w", fmt.Sprintf(format, args...), store.ErrInvalid)
	}
	return fmt.Errorf("redisstore: Redis URL %q: %s: %w", redacted, fmt.Sprintf(format, args...), store.ErrInvalid)
}

// parseURL parses a store URL strictly. Every error wraps store.ErrInvalid,
// says what is allowed, and never contains the password: the user info is
// split off and decoded first, and nothing of it is ever echoed.
//
// The go-redis options in the query (dial_timeout, pool_size, ...) are
// parsed by go-redis itself (redis.ParseURL, ParseClusterURL,
// ParseFailoverURL), so they mean what they mean to go-redis users.
func parseURL(raw string) (*target, error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return nil, invalid("", "does not start with a scheme: want %s", schemeList)
	}
	scheme = strings.ToLower(scheme)
	sc, ok := schemes[scheme]
	if !ok {
		return nil, invalid("", "unknown scheme %q: want %s", abbrev(scheme), schemeList)
	}
	if strings.ContainsFunc(raw, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return nil, invalid("", "contains a control character")
	}
	// The authority ends at the first '/' or '?'; its user info ends at its
	// last '@'. A '@' further on means the password holds an unescaped '/'
	// or '?', and the split would be wrong: say so without echoing anything.
	end := strings.IndexAny(rest, "/?")
	if end < 0 {
		end = len(rest)
	}
	auth, tail := rest[:end], rest[end:]
	if strings.Contains(tail, "@") {
		return nil, invalid("", "malformed: an '@' after the host (percent-encode '/', '?', '#', '@' and '%%' in the user name and password)")
	}
	var user, pass string
	var hasUser, hasPass bool
	hosts := auth
	if at := strings.LastIndex(auth, "@"); at >= 0 {
		info := auth[:at]
		hosts = auth[at+1:]
		hasUser = true
		u, p, colon := strings.Cut(info, ":")
		var err error
		if user, err = url.PathUnescape(u); err != nil {
			return nil, invalid("", "the user name is not validly percent-encoded")
		}
		if colon {
			hasPass = true
			if pass, err = url.PathUnescape(p); err != nil {
				return nil, invalid("", "the password is not validly percent-encoded")
			}
		}
	}
	if strings.Contains(hosts, "#") || strings.Contains(tail, "#") {
		return nil, invalid("", "has a fragment ('#'); percent-encode '#' in the user name and password")
	}
	// The rest, without user info, is safe to parse and to echo (except a
	// sentinel_password in the query, which redact hides).
	u, err := url.Parse(scheme + "://" + hostPlaceholder + tail)
	if err != nil {
		return nil, invalid("", "malformed path or query")
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, invalid("", "malformed query: options are name=value pairs separated by '&', percent-encoded")
	}
	t := &target{kind: sc.kind}
	t.redacted = redact(scheme, hasUser, user, hasPass, hosts, u.EscapedPath(), q)
	for k, v := range q {
		if len(v) > 1 && k != "addr" {
			return nil, invalid(t.redacted, "option %s is given %d times", k, len(v))
		}
	}
	if q.Has("prefix") {
		t.prefix = q.Get("prefix")
		if err := checkPrefix(t.prefix); err != nil {
			return nil, invalid(t.redacted, "prefix: %v", strings.TrimPrefix(err.Error(), "redisstore: "))
		}
		q.Del("prefix")
	}
	for _, k := range []string{"username", "password"} {
		if q.Has(k) {
			return nil, invalid(t.redacted, "option %s: put the user name and password in the URL's user info (scheme://user:password@host)", k)
		}
	}
	tf, err := parseTLSOptions(t, q, sc.tls)
	if err != nil {
		return nil, err
	}
	db, err := parseDB(t, u.Path, scheme == "unix", q)
	if err != nil {
		return nil, err
	}
	if scheme == "unix" {
		if hosts != "" {
			return nil, invalid(t.redacted, "unix:// takes no host: unix://[user:password@]/path/to/socket[?db=N]")
		}
		return parseUnix(t, u.Path, q, db, user, pass)
	}

	var list []string
	if hosts != "" || sc.kind == single {
		list = strings.Split(hosts, ",")
	}
	if sc.kind != single {
		list = append(list, q["addr"]...)
		q.Del("addr")
	} else if q.Has("addr") {
		return nil, invalid(t.redacted, "option addr: a single server has one address; for several use redis+cluster:// or redis+sentinel://")
	}
	if len(list) == 0 {
		return nil, invalid(t.redacted, "no host: want host:port[,host:port...]")
	}
	if sc.kind == single && len(list) > 1 {
		return nil, invalid(t.redacted, "%d hosts: a list of hosts needs redis+cluster:// (Redis Cluster) or redis+sentinel:// (Sentinel)", len(list))
	}
	defPort := "6379"
	if sc.kind == sentinel {
		defPort = "26379"
	}
	addrs := make([]string, 0, len(list))
	for _, h := range list {
		a, err := parseHost(h, defPort, sc.kind == single)
		if err != nil {
			return nil, invalid(t.redacted, "%v", err)
		}
		if !slices.Contains(addrs, a) {
			addrs = append(addrs, a)
		}
	}

	// Hand the go-redis options to go-redis, on a URL without secrets.
	base := "redis"
	if sc.tls {
		base = "rediss"
	}
	gq := url.Values{}
	for k, v := range q {
		switch k {
		case "sentinel_username", "sentinel_password", "master_name":
			continue
		}
		gq[k] = v
	}
	gu := base + "://" + addrs[0] + "?" + gq.Encode()
	switch sc.kind {
	case single:
		o, err := redis.ParseURL(gu)
		if err != nil {
			return nil, goRedisInvalid(t, err)
		}
		o.Username, o.Password, o.DB = user, pass, db
		tf.apply(o.TLSConfig)
		t.single = o
	case cluster:
		if db != 0 {
			return nil, invalid(t.redacted, "database %d: Redis Cluster has only database 0", db)
		}
		o, err := redis.ParseClusterURL(gu)
		if err != nil {
			return nil, goRedisInvalid(t, err)
		}
		o.Addrs = addrs
		o.Username, o.Password = user, pass
		tf.apply(o.TLSConfig)
		t.cluster = o
	case sentinel:
		name, err := masterName(t, u.Path, q)
		if err != nil {
			return nil, err
		}
		o, err := redis.ParseFailoverURL(gu)
		if err != nil {
			return nil, goRedisInvalid(t, err)
		}
		o.SentinelAddrs = addrs
		o.MasterName = name
		o.Username, o.Password, o.DB = user, pass, db
		o.SentinelUsername, o.SentinelPassword = q.Get("sentinel_username"), q.Get("sentinel_password")
		tf.apply(o.TLSConfig)
		t.failover = o
	}
	return t, nil
}

// hostPlaceholder stands for the host list when the path and query are
// parsed on their own.
const hostPlaceholder = "h"

// parseUnix: unix://[user:password@]/path/to/socket[?db=N], the path is the
// socket.
func parseUnix(t *target, path string, q url.Values, db int, user, pass string) (*target, error) {
	if !strings.HasPrefix(path, "/") || path == "/" {
		return nil, invalid(t.redacted, "unix:// needs an absolute socket path: unix://[user:password@]/path/to/socket[?db=N]")
	}
	q.Del("db")
	o, err := redis.ParseURL((&url.URL{Scheme: "unix", Path: path, RawQuery: q.Encode()}).String())
	if err != nil {
		return nil, goRedisInvalid(t, err)
	}
	o.Username, o.Password, o.DB = user, pass, db
	t.single = o
	return t, nil
}

// parseDB reads the database number from the path (/N) of a single-server
// or cluster URL, or from the db option (go-redis' form), strictly: a
// decimal number >= 0, given once.
func parseDB(t *target, path string, unix bool, q url.Values) (int, error) {
	kind := t.kind
	var fromPath string
	switch {
	case unix:
		// the path is the socket
	case kind == sentinel:
		parts := strings.Split(strings.Trim(path, "/"), "/")
		if len(parts) == 2 {
			fromPath = parts[1]
		} else if len(parts) > 2 {
			return 0, invalid(t.redacted, "path %q: want /mastername[/db]", path)
		}
	default:
		p := strings.TrimPrefix(path, "/")
		if strings.Contains(p, "/") {
			return 0, invalid(t.redacted, "path %q: want /db, a database number", path)
		}
		fromPath = p
	}
	fromQuery := q.Get("db")
	q.Del("db")
	if fromPath != "" && fromQuery != "" && fromPath != fromQuery {
		return 0, invalid(t.redacted, "database given twice (/%s and db=%s)", fromPath, fromQuery)
	}
	s := fromPath
	if s == "" {
		s = fromQuery
	}
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || !allDigits(s) {
		return 0, invalid(t.redacted, "database %q: want a number from 0 up (the server's databases setting, 16 by default)", abbrev(s))
	}
	return n, nil
}

// masterName reads the Sentinel master name: the first path segment, or
// go-redis' master_name option.
func masterName(t *target, path string, q url.Values) (string, error) {
	name, _, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	if qn := q.Get("master_name"); qn != "" {
		if name != "" && name != qn {
			return "", invalid(t.redacted, "master name given twice (/%s and master_name=%s)", name, qn)
		}
		name = qn
	}
	if name == "" {
		return "", invalid(t.redacted, "no master name: want redis+sentinel://[user:password@]host:26379[,host:port...]/mastername[/db]")
	}
	return name, nil
}

// parseHost validates "host[:port]" or "[ipv6][:port]" and returns
// host:port. An empty host is localhost only where go-redis allows it (a
// single server).
func parseHost(h, defPort string, emptyOK bool) (string, error) {
	if h == "" {
		if emptyOK {
			return net.JoinHostPort("localhost", defPort), nil
		}
		return "", fmt.Errorf("empty host in the host list: want host:port[,host:port...]")
	}
	host, port := h, defPort
	if strings.HasPrefix(h, "[") {
		i := strings.Index(h, "]")
		if i < 0 {
			return "", fmt.Errorf("host %q: unclosed '['", h)
		}
		host = h[1:i]
		switch r := h[i+1:]; {
		case r == "":
		case strings.HasPrefix(r, ":"):
			port = r[1:]
		default:
			return "", fmt.Errorf("host %q: want [ipv6]:port", h)
		}
	} else if i := strings.LastIndex(h, ":"); i >= 0 {
		host, port = h[:i], h[i+1:]
		if strings.Contains(host, ":") {
			return "", fmt.Errorf("host %q: put an IPv6 address in brackets, [addr]:port", h)
		}
	}
	if host == "" {
		return "", fmt.Errorf("host %q has no host name", h)
	}
	if strings.ContainsAny(host, " %/\\@") {
		return "", fmt.Errorf("host %q is not a host name or address", h)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || !allDigits(port) {
		return "", fmt.Errorf("host %q: port %q is not a number from 1 to 65535", h, port)
	}
	return net.JoinHostPort(host, port), nil
}

// goRedisInvalid wraps an error of go-redis' URL parser, which only ever
// sees the URL without user info.
func goRedisInvalid(t *target, err error) error {
	msg := strings.TrimPrefix(err.Error(), "redis: ")
	if strings.HasPrefix(msg, "unexpected option") {
		own := "prefix, db, tls_ca, tls_cert, tls_key, tls_server_name"
		if t.kind == sentinel {
			own += ", master_name, sentinel_username, sentinel_password, addr"
		} else if t.kind == cluster {
			own += ", addr"
		}
		return invalid(t.redacted, "%s (herd's options: %s; the others are go-redis' URL options, such as dial_timeout, read_timeout, write_timeout, pool_size, max_retries, protocol, client_name: see redis.ParseURL)", msg, own)
	}
	switch {
	case strings.Contains(msg, " duration"):
		msg += " (want a Go duration such as 500ms or 2s, or a number of seconds; 0 or less disables the timeout)"
	case strings.Contains(msg, " number"):
		msg += " (want an integer)"
	}
	return invalid(t.redacted, "%s", msg)
}

// redact rebuilds the URL for messages: the password and
// sentinel_password become "xxxxx".
func redact(scheme string, hasUser bool, user string, hasPass bool, hosts, path string, q url.Values) string {
	var b strings.Builder
	b.WriteString(scheme + "://")
	if hasUser {
		b.WriteString(url.PathEscape(user))
		if hasPass {
			b.WriteString(":xxxxx")
		}
		b.WriteString("@")
	}
	b.WriteString(hosts)
	b.WriteString(path)
	if len(q) > 0 {
		c := url.Values{}
		for k, v := range q {
			if k == "sentinel_password" {
				v = []string{"xxxxx"}
			}
			c[k] = v
		}
		b.WriteString("?" + c.Encode())
	}
	return b.String()
}
