package pgstore

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/herdhq/herd/internal/urlauth"
	"github.com/herdhq/herd/store"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// herdOptions are the query options Open reads itself; every other option
// is pgx's (pgxpool.ParseConfig: pool_max_conns, connect_timeout, sslmode,
// default_query_exec_mode, ...).
var herdOptions = []string{"schema", "listen", "poll_interval", "log_limit", "tx_idle_timeout", "record_lock_timeout", "dial_stagger"}

// secretOptions are the query options whose values never appear in
// messages.
var secretOptions = []string{"password", "sslpassword"}

// target is a parsed store URL.
type target struct {
	pgxURL   string   // the URL for pgxpool.ParseConfig: herd's options removed
	redacted string   // the URL without secrets, for messages
	secrets  []string // values to keep out of every message
	opts     []Option // herd's options from the query
}

func invalid(redacted, format string, args ...any) error {
	if redacted == "" {
		return fmt.Errorf("pgstore: PostgreSQL URL: %s: %w", fmt.Sprintf(format, args...), store.ErrInvalid)
	}
	return fmt.Errorf("pgstore: PostgreSQL URL %q: %s: %w", redacted, fmt.Sprintf(format, args...), store.ErrInvalid)
}

// parseURL splits a store URL into herd's options and what pgx parses.
// Every error wraps store.ErrInvalid and never contains the password: the
// user info is split off first, and nothing of it is ever echoed.
//
//	postgres://[user[:password]@][host][:port][,host[:port]...][/database][?option=value&...]
func parseURL(raw string) (*target, error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return nil, invalid("", "does not start with postgres:// or postgresql://")
	}
	scheme = strings.ToLower(scheme)
	if scheme != "postgres" && scheme != "postgresql" {
		return nil, invalid("", "unknown scheme %q: want postgres:// or postgresql://", abbrev(scheme))
	}
	if strings.ContainsFunc(raw, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return nil, invalid("", "contains a control character")
	}
	cred, hosts, tail, err := urlauth.Split(rest)
	if err != nil {
		return nil, invalid("", "%v", err)
	}
	t := &target{}
	if cred.HasPass {
		t.secrets = append(t.secrets, cred.Pass, cred.RawPass)
	}
	user, hasUser, hasPass, rawPass := cred.User, cred.HasUser, cred.HasPass, cred.RawPass
	path, query, _ := strings.Cut(tail, "?")
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, invalid("", "malformed query: options are name=value pairs separated by '&', percent-encoded")
	}
	for _, k := range secretOptions {
		for _, v := range q[k] {
			t.secrets = append(t.secrets, v, url.QueryEscape(v))
		}
	}
	t.redacted = urlauth.Redact(scheme, cred, hosts, path, q, secretOptions...)
	for k, v := range q {
		if len(v) > 1 {
			return nil, invalid(t.redacted, "option %s is given %d times", k, len(v))
		}
	}
	for _, k := range herdOptions {
		if !q.Has(k) {
			continue
		}
		v := q.Get(k)
		q.Del(k)
		opt, err := herdOption(k, v)
		if err != nil {
			return nil, invalid(t.redacted, "%v", err)
		}
		t.opts = append(t.opts, opt)
	}
	var b strings.Builder
	b.WriteString(scheme + "://")
	if hasUser {
		b.WriteString(url.PathEscape(user))
		if hasPass {
			b.WriteString(":" + rawPass)
		}
		b.WriteString("@")
	}
	b.WriteString(hosts + path)
	if len(q) > 0 {
		b.WriteString("?" + q.Encode())
	}
	t.pgxURL = b.String()
	return t, nil
}

// checkSchema accepts schema names that need no quoting anywhere: 1 to 48
// lower-case ASCII letters, digits and underscores, not starting with a
// digit or "pg_" (reserved by PostgreSQL). 48 bytes leave room for the
// notification channel's suffix within PostgreSQL's 63-byte names.
func checkSchema(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("pgstore: schema name is empty: %w", store.ErrInvalid)
	case len(name) > 48:
		return fmt.Errorf("pgstore: schema name is %d bytes, more than 48: %w", len(name), store.ErrInvalid)
	case strings.HasPrefix(name, "pg_"):
		return fmt.Errorf("pgstore: schema name %q starts with pg_, which PostgreSQL reserves: %w", name, store.ErrInvalid)
	case name[0] >= '0' && name[0] <= '9':
		return fmt.Errorf("pgstore: schema name %q starts with a digit: %w", abbrev(name), store.ErrInvalid)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return fmt.Errorf("pgstore: schema name %q: use lower-case letters, digits and underscores only: %w", abbrev(name), store.ErrInvalid)
		}
	}
	return nil
}

func abbrev(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// herdOption is the Option of herd's URL option k=v.
func herdOption(k, v string) (Option, error) {
	switch k {
	case "schema":
		if err := checkSchema(v); err != nil {
			return nil, fmt.Errorf("schema: %v", strings.TrimPrefix(err.Error(), "pgstore: "))
		}
		return WithSchema(v), nil
	case "listen":
		switch strings.ToLower(v) {
		case "on", "true", "1", "yes":
			return WithListen(true), nil
		case "off", "false", "0", "no":
			return WithListen(false), nil
		default:
			return nil, fmt.Errorf("listen=%q: want on or off", abbrev(v))
		}
	case "poll_interval", "tx_idle_timeout", "record_lock_timeout", "dial_stagger":
		d, err := time.ParseDuration(v)
		if err != nil || d < 10*time.Millisecond || d > time.Hour {
			return nil, fmt.Errorf("%s=%q: want a Go duration from 10ms to 1h, such as 500ms", k, abbrev(v))
		}
		switch k {
		case "poll_interval":
			return WithPollInterval(d), nil
		case "tx_idle_timeout":
			return WithTxIdleTimeout(d), nil
		case "dial_stagger":
			return WithDialStagger(d), nil
		}
		return WithLockTimeout(d), nil
	case "log_limit":
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100_000_000 {
			return nil, fmt.Errorf("log_limit=%q: want a number of entries from 1 to 100000000", abbrev(v))
		}
		return WithLogLimit(n), nil
	}
	return nil, fmt.Errorf("option %s is not herd's", k) // unreachable: k is one of herdOptions
}

// parseErr is an error of pgx's URL parser, which may quote the URL it was
// given, password included: its message is rebuilt without it.
func parseErr(t *target, err error) error {
	msg := err.Error()
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		msg = strings.ReplaceAll(msg, pe.ConnString, t.redacted)
	}
	msg = redactAll(msg, t.secrets)
	return fmt.Errorf("pgstore: PostgreSQL URL %q: %s (herd's options: %s; the others are pgx's, see pgxpool.ParseConfig): %w",
		t.redacted, msg, strings.Join(herdOptions, ", "), store.ErrInvalid)
}

func redactAll(msg string, secrets []string) string {
	for _, v := range secrets {
		if len(v) >= 4 {
			msg = strings.ReplaceAll(msg, v, "xxxxx")
		}
	}
	return msg
}

// poolConfig is the pool's configuration for t and opts, its connections
// made by dial (nil: pgx's), and the LISTEN connection's.
func poolConfig(t *target, dial pgconn.DialFunc, opts []Option) (*pgxpool.Config, *pgx.ConnConfig, config, error) {
	pc, err := pgxpool.ParseConfig(t.pgxURL)
	if err != nil {
		return nil, nil, config{}, parseErr(t, err)
	}
	// A server that accepts the connection and never answers must not
	// hang Open (nor the store's later connections): pgx waits for ever
	// without a connect timeout.
	if pc.ConnConfig.ConnectTimeout == 0 {
		pc.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	if _, ok := pc.ConnConfig.RuntimeParams["application_name"]; !ok {
		pc.ConnConfig.RuntimeParams["application_name"] = "herd"
	}
	if dial != nil {
		pc.ConnConfig.DialFunc = dial
	}
	cfg := config{schema: DefaultSchema, dialStagger: DefaultDialStagger}
	for _, o := range append(t.opts, opts...) {
		o(&cfg)
	}
	// Every connection (the pool's, LISTEN's, the ties') is dialed by
	// staggered attempts (WithDialStagger).
	pc.ConnConfig.DialFunc = staggered(pc.ConnConfig.DialFunc, cfg.dialStagger)
	listenCfg := pc.ConnConfig.Copy()
	pc.ConnConfig.DialFunc = resetOnTimeout(pc.ConnConfig.DialFunc)
	return pc, listenCfg, cfg, nil
}
