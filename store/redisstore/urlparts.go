package redisstore

// The parts of a Redis URL: a unix socket, the database, the sentinel's master name, hosts; and the redacted form of a URL.

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

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
