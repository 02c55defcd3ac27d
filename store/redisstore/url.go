package redisstore

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/herdhq/herd/internal/urlauth"
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
	cred, hosts, tail, err := urlauth.Split(rest)
	if err != nil {
		return nil, invalid("", "%v", err)
	}
	user, pass := cred.User, cred.Pass
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
	t.redacted = urlauth.Redact(scheme, cred, hosts, u.EscapedPath(), q, "sentinel_password")
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

	addrs, err := hostList(t, sc.kind, hosts, q)
	if err != nil {
		return nil, err
	}
	if err := goRedisOptions(t, sc.tls, addrs, q, cred, db, tf, u.Path); err != nil {
		return nil, err
	}
	return t, nil
}

// hostPlaceholder stands for the host list when the path and query are
// parsed on their own.
const hostPlaceholder = "h"

// hostList is the addresses of hosts (and of addr options, for a cluster
// or a sentinel), each with its default port, without repeats.
func hostList(t *target, kind deployment, hosts string, q url.Values) ([]string, error) {
	var list []string
	if hosts != "" || kind == single {
		list = strings.Split(hosts, ",")
	}
	if kind != single {
		list = append(list, q["addr"]...)
		q.Del("addr")
	} else if q.Has("addr") {
		return nil, invalid(t.redacted, "option addr: a single server has one address; for several use redis+cluster:// or redis+sentinel://")
	}
	if len(list) == 0 {
		return nil, invalid(t.redacted, "no host: want host:port[,host:port...]")
	}
	if kind == single && len(list) > 1 {
		return nil, invalid(t.redacted, "%d hosts: a list of hosts needs redis+cluster:// (Redis Cluster) or redis+sentinel:// (Sentinel)", len(list))
	}
	defPort := "6379"
	if kind == sentinel {
		defPort = "26379"
	}
	addrs := make([]string, 0, len(list))
	for _, h := range list {
		a, err := parseHost(h, defPort, kind == single)
		if err != nil {
			return nil, invalid(t.redacted, "%v", err)
		}
		if !slices.Contains(addrs, a) {
			addrs = append(addrs, a)
		}
	}

	return addrs, nil
}

// goRedisOptions hands the go-redis options of q to go-redis, on a URL
// without secrets, and sets t's client options with the credentials, the
// database and the TLS files.
func goRedisOptions(t *target, tls bool, addrs []string, q url.Values, cred urlauth.UserInfo, db int, tf *tlsFiles, path string) error {
	user, pass := cred.User, cred.Pass
	base := "redis"
	if tls {
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
	switch t.kind {
	case single:
		o, err := redis.ParseURL(gu)
		if err != nil {
			return goRedisInvalid(t, err)
		}
		o.Username, o.Password, o.DB = user, pass, db
		tf.apply(o.TLSConfig)
		t.single = o
	case cluster:
		if db != 0 {
			return invalid(t.redacted, "database %d: Redis Cluster has only database 0", db)
		}
		o, err := redis.ParseClusterURL(gu)
		if err != nil {
			return goRedisInvalid(t, err)
		}
		o.Addrs = addrs
		o.Username, o.Password = user, pass
		tf.apply(o.TLSConfig)
		t.cluster = o
	case sentinel:
		name, err := masterName(t, path, q)
		if err != nil {
			return err
		}
		o, err := redis.ParseFailoverURL(gu)
		if err != nil {
			return goRedisInvalid(t, err)
		}
		o.SentinelAddrs = addrs
		o.MasterName = name
		o.Username, o.Password, o.DB = user, pass, db
		o.SentinelUsername, o.SentinelPassword = q.Get("sentinel_username"), q.Get("sentinel_password")
		tf.apply(o.TLSConfig)
		t.failover = o
	}
	return nil
}
