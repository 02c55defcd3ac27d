package redisstore

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/herdhq/herd/store"
)

var _ store.Store = (*Store)(nil)

// DefaultPrefix is the key prefix used unless WithPrefix or the URL's
// prefix parameter says otherwise.
const DefaultPrefix = "herd"

// Store is a store.Store on Redis. It is safe for concurrent use.
type Store struct {
	client redis.UniversalClient
	owned  bool         // Close closes client (Open made it)
	prefix string       // validated key prefix
	err    error        // a bad option given to New: every call returns it
	log    logConfig    // see log.go
	ghosts store.Ghosts // sessions that failed opens may have opened

	unblock atomic.Int32   // whether the user may unblock a wait (logwait.go)
	waits   sync.WaitGroup // waits whose unblock got no answer (logwait.go)

	mu     sync.Mutex
	closed bool
}

// Option configures a Store.
type Option func(*config)

type config struct {
	prefix string
	log    logConfig
}

// WithPrefix sets the prefix of every key and channel name the store uses
// (default "herd"). Stores with different prefixes share a server without
// seeing each other. The prefix may not be empty, longer than 256 bytes,
// or contain braces (they would change the Redis Cluster hash tag) or
// control characters. Given to Open, it overrides the URL's prefix
// parameter.
func WithPrefix(prefix string) Option {
	return func(c *config) { c.prefix = prefix }
}

func checkPrefix(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("redisstore: key prefix is empty: %w", store.ErrInvalid)
	case len(p) > 256:
		return fmt.Errorf("redisstore: key prefix is %d bytes, more than 256: %w", len(p), store.ErrInvalid)
	case strings.ContainsAny(p, "{}"):
		return fmt.Errorf("redisstore: key prefix %q contains a brace, which would break the Redis Cluster hash tag: %w", p, store.ErrInvalid)
	case strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return fmt.Errorf("redisstore: key prefix %q contains a control character: %w", p, store.ErrInvalid)
	}
	return nil
}

// New returns a Store using client, which may be a *redis.Client, a
// *redis.ClusterClient (every group's keys share one hash slot) or a
// failover client. Close does not close client: it belongs to the caller.
// An invalid option is reported by every method of the returned Store.
// Create the client with ContextTimeoutEnabled set: otherwise go-redis
// ignores context deadlines, and a member cut off from Redis may cancel its
// handlers only after its session has expired. Its dialer is its own:
// Open's resets a connection when it closes it, so that a call given up on
// is not sent after a network cut heals (resetOnClose).
func New(client redis.UniversalClient, opts ...Option) *Store {
	cfg := config{prefix: DefaultPrefix}
	for _, o := range opts {
		o(&cfg)
	}
	s := &Store{client: client, prefix: cfg.prefix, log: cfg.log}
	if client == nil {
		s.err = fmt.Errorf("redisstore: New was given a nil client: %w", store.ErrInvalid)
	} else {
		s.err = checkPrefix(cfg.prefix)
	}
	return s
}

// Open connects to the Redis deployment at rawURL, checks it, and returns a
// Store on it.
//
//	redis://[[user]:password@]host[:port][/db][?option=value&...]
//	rediss://...                       (TLS)
//	unix://[[user]:password@]/path/to/socket[?db=N]
//	redis+cluster://[[user]:password@]host:port[,host:port...][?option=value&...]
//	rediss+cluster://...               (Redis Cluster over TLS)
//	redis+sentinel://[[user]:password@]host:26379[,host:port...]/mastername[/db][?option=value&...]
//	rediss+sentinel://...              (Sentinel, TLS to sentinels and servers)
//
// A cluster URL lists seed nodes (any of them; the others are discovered);
// a sentinel URL lists sentinels, and the user info is the Redis servers'
// credentials (the sentinels' are the options sentinel_username and
// sentinel_password). go-redis' own forms are accepted too: addr=host:port
// (repeated) adds a seed or sentinel, master_name=name names the master.
// Besides go-redis's URL options (dial_timeout, pool_size, ...; see
// redis.ParseURL), the query parameter prefix sets the key prefix; a
// WithPrefix option overrides it.
//
// Open dials the first reachable address once (so an unreachable host, or
// rediss:// against a plain port, fails within one dial timeout), then
// checks that every server that will hold herd's keys runs Redis
// MinServerVersion or later, is a primary, and is the kind of deployment
// the scheme names (a Redis Cluster node behind redis:// is refused with a
// message naming redis+cluster://), and, where the server lets the user ask
// (ACL DRYRUN), that the user may run every command herd needs on the keys
// under its prefix (see docs/security.md).
//
// For TLS (rediss://), the query options tls_ca, tls_cert and tls_key name
// PEM files: the CA that signed the server's certificate (the system's CAs
// without it), and a client certificate and its unencrypted key;
// tls_server_name sets the name checked against the server's certificate
// (the URL's host without it). Verification is on unless go-redis'
// skip_verify=true turns it off.
//
// A malformed URL, or a deployment that does not match it, gives an error
// wrapping store.ErrInvalid that says what is allowed; a server that cannot
// be reached (or refuses the credentials) one wrapping store.ErrUnavailable.
// Error messages never contain the password. The first Open routes go-redis'
// own log lines to log/slog (see the package documentation).
func Open(ctx context.Context, rawURL string, opts ...Option) (*Store, error) {
	if err := checkContext(ctx, "open"); err != nil {
		return nil, err
	}
	return open(ctx, rawURL, nil, opts...)
}

// open is Open with the connections dialed by base (nil: TCP), under TLS
// and the rest of the dialer (a test's dial from a network namespace).
func open(ctx context.Context, rawURL string, base dialFunc, opts ...Option) (*Store, error) {
	t, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	if t.prefix != "" {
		opts = append([]Option{WithPrefix(t.prefix)}, opts...)
	}
	routeGoRedisLogs()
	client, dial, timeout := newClient(t, base)
	s := New(client, opts...)
	s.owned = true
	if t.kind == sentinel {
		// A failover during a wait would send its CLIENT UNBLOCK to the new
		// primary, where the id may name another application's client:
		// waits there stay on the pool, 2 minutes (logwait.go).
		s.unblock.Store(unblockDenied)
	}
	if s.err != nil {
		_ = client.Close()
		return nil, s.err
	}
	// The checks answer in milliseconds: without a deadline of the
	// caller's, a server that stays mute is reported within twice the dial
	// timeout (a call's own read timeout, defaultIOTimeout, is for large
	// reads).
	if _, ok := ctx.Deadline(); !ok {
		if timeout <= 0 {
			timeout = defaultDialTimeout
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 2*timeout)
		defer cancel()
	}
	first, err := probe(ctx, t, dial, timeout)
	if err == nil {
		err = check(ctx, t, client, first)
	}
	if err == nil {
		err = checkACL(ctx, t, client, s.prefix)
	}
	if err != nil {
		_ = client.Close()
		return nil, err
	}
	return s, nil
}

// Close closes the store's connections if the store was made by Open. Sessions are not closed. Calls after Close fail.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	if s.owned && s.client != nil {
		// Closing the pool closes the connections of the waits on the
		// log under way, a caller's or one whose unblock got no answer
		// (logwait.go): they end, and no goroutine of theirs outlives
		// Close.
		err := s.client.Close()
		s.waits.Wait()
		return err
	}
	return nil
}

// keys are the names of one group's keys. The group id is base64url-encoded
// inside one hash tag, so any id (braces, colons, spaces, ...) yields valid,
// distinct names that Redis Cluster maps to one slot.
type keys struct {
	sessions, members, partitions, owners, checkpoints string
	partset, partlist, givenback, setinfo              string // see scripts.go
	epochat, ckptat, loads                             string // see scripts.go
	log, version                                       string // see log.go
}

func (s *Store) keys(group string) keys {
	base := s.prefix + ":{" + base64.RawURLEncoding.EncodeToString([]byte(group)) + "}:"
	return keys{
		sessions:    base + "sessions",
		members:     base + "members",
		partitions:  base + "partitions",
		partset:     base + "partset",
		partlist:    base + "partlist",
		setinfo:     base + "setinfo",
		owners:      base + "owners",
		checkpoints: base + "checkpoints",
		epochat:     base + "epochat",
		ckptat:      base + "ckptat",
		givenback:   base + "givenback",
		loads:       base + "loads",
		log:         base + "log",
		version:     base + "version",
	}
}

// begin is store.Begin, after the arguments (args is the error of the
// store.Validate function of op, nil if valid) the error New's client
// gave (s.err).
func (s *Store) begin(ctx context.Context, op string, args error) error {
	if args == nil && s.err != nil {
		return s.err
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	return store.Begin(ctx, "redisstore", op, args, closed)
}

// checkContext is the first check of the exported calls that do not start
// with begin: a nil ctx is an invalid argument (it would panic).
func checkContext(ctx context.Context, op string) error {
	if ctx == nil {
		return fmt.Errorf("redisstore: %s: nil context (pass context.Background() or a call's own): %w", op, store.ErrInvalid)
	}
	return nil
}

// fail maps a go-redis error onto the store's sentinels, keeping the
// original in the chain.
func fail(op string, err error) error {
	if err == nil {
		return nil
	}
	var nc notCluster
	if errors.As(err, &nc) {
		return fmt.Errorf("redisstore: %s: the server is a Redis Cluster node and redirected the call (%v); "+
			"a client of a single server cannot follow: open the store with redis+cluster:// or give New a *redis.ClusterClient: %w",
			op, nc.err, store.ErrInvalid)
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		msg := rerr.Error()
		switch {
		case strings.HasPrefix(msg, "WRONGTYPE"):
			return fmt.Errorf("redisstore: %s: a key holds the wrong kind of value: %w: %w", op, store.ErrCorrupt, err)
		case hasAnyPrefix(msg, "MOVED", "ASK"):
			// go-redis' cluster client follows redirections itself (eval
			// marks the ones that reach us through any other client): one
			// that still comes back means the slot kept moving.
			return fmt.Errorf("redisstore: %s: the key's hash slot moved repeatedly (cluster resharding): %w: %w", op, store.ErrUnavailable, err)
		case strings.HasPrefix(msg, "READONLY"):
			return fmt.Errorf("redisstore: %s: the server is a read-only replica (a failover demoted it, or the URL names a replica): "+
				"point the URL at the primary, or use redis+sentinel:// to follow failovers: %w: %w", op, store.ErrUnavailable, err)
		case strings.HasPrefix(msg, "CLUSTERDOWN"):
			return fmt.Errorf("redisstore: %s: the Redis Cluster is down (a primary without a replica failed, or slots are unassigned): %w: %w", op, store.ErrUnavailable, err)
		case strings.Contains(msg, "can't run this command or subcommand script"):
			return fmt.Errorf("redisstore: %s: %s: %w", op, deniedInScript(msg), err)
		case hasAnyPrefix(msg, "LOADING", "MASTERDOWN", "TRYAGAIN",
			"BUSY", "NOREPLICAS", "NOAUTH", "WRONGPASS", "OOM"):
			return fmt.Errorf("redisstore: %s: %w: %w", op, store.ErrUnavailable, err)
		}
		return fmt.Errorf("redisstore: %s: %w", op, err)
	}
	// Network errors, timeouts, cancelled contexts, a closed client.
	return fmt.Errorf("redisstore: %s: %w: %w", op, store.ErrUnavailable, err)
}

func hasAnyPrefix(s string, prefixes ...string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// eval runs a script and returns its reply. go-redis ends a call at its
// context's deadline (with ContextTimeoutEnabled) but not when the context is
// cancelled, so where ctx can be cancelled the call runs on a goroutine and
// eval returns as soon as ctx is done: a member's handler whose claim is
// cancelled must not wait for a server that stopped answering. The command
// then finishes on its connection in the background (when the server answers,
// or at ctx's deadline or the client's read timeout); like any call that
// fails on a timeout, it may or may not have been applied.
func (s *Store) eval(ctx context.Context, sc *redis.Script, ks []string, args ...any) ([]any, error) {
	res, err := s.evalRaw(ctx, sc, ks, args...)
	return res, s.redirected(err)
}

func (s *Store) evalRaw(ctx context.Context, sc *redis.Script, ks []string, args ...any) ([]any, error) {
	if ctx.Done() == nil {
		return sc.Run(ctx, s.client, ks, args...).Slice()
	}
	type reply struct {
		res []any
		err error
	}
	ch := make(chan reply, 1)
	go func() {
		res, err := sc.Run(ctx, s.client, ks, args...).Slice()
		ch <- reply{res, err}
	}()
	select {
	case r := <-ch:
		return r.res, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// run runs a script and returns its status and the rest of its reply.
func (s *Store) run(ctx context.Context, op string, sc *redis.Script, ks []string, args ...any) (string, []any, error) {
	res, err := s.eval(ctx, sc, ks, args...)
	if err != nil {
		return "", nil, fail(op, err)
	}
	if len(res) == 0 {
		return "", nil, fmt.Errorf("redisstore: %s: empty script reply", op)
	}
	status, _ := res[0].(string)
	if status == "corrupt" {
		key, field := str(res, 1), str(res, 2)
		return "", nil, fmt.Errorf("redisstore: %s: key %q field %q cannot be decoded: %w", op, key, field, store.ErrCorrupt)
	}
	return status, res[1:], nil
}

// str returns res[i] as a string, "" if it is missing or nil.
func str(res []any, i int) string {
	if i < len(res) {
		if v, ok := res[i].(string); ok {
			return v
		}
	}
	return ""
}

// bytesAt returns res[i] as bytes, nil if it is missing, nil or false (a
// Lua false arrives as nil over RESP2 and as false over RESP3).
func bytesAt(res []any, i int) []byte {
	if i < len(res) {
		if v, ok := res[i].(string); ok {
			return []byte(v)
		}
	}
	return nil
}

func ttlMicros(ttl time.Duration) string {
	us := ttl / time.Microsecond
	if ttl%time.Microsecond != 0 {
		us++
	}
	return strconv.FormatInt(int64(us), 10)
}

func unexpected(op, status string) error {
	return fmt.Errorf("redisstore: %s: unexpected script status %q (mismatched script version?)", op, status)
}
