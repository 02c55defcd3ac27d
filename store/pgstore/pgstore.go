package pgstore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/herdhq/herd/store"
)

var _ store.Store = (*Store)(nil)

const (
	// DefaultSchema is the schema the store's tables live in unless
	// WithSchema or the URL's schema option says otherwise.
	DefaultSchema = "herd"
	// DefaultLogLimit is how many entries of a group's log the store keeps
	// at least: a whole first placement of 100,000 partitions.
	DefaultLogLimit = 100_000
	// DefaultPollInterval is how often a Changes call waiting at the end of
	// the log reads it when LISTEN is off or not working.
	DefaultPollInterval = 500 * time.Millisecond
	// backstopInterval is how often a waiting Changes call reads the log
	// while LISTEN works: notifications may be lost with a connection.
	backstopInterval = 10 * time.Second
	// MinServerVersion is the oldest PostgreSQL Open accepts (tested on 15).
	MinServerVersion = 13
	// DefaultConnectTimeout bounds each new connection (the TCP connect
	// and the server's first answers) unless the URL's connect_timeout
	// says otherwise, as redisstore bounds its dials.
	DefaultConnectTimeout = 5 * time.Second
)

// Option configures a Store.
type Option func(*config)

type config struct {
	schema   string
	logLimit int
	listen   bool
	poll     time.Duration
	backstop time.Duration // tests lengthen it to show that LISTEN wakes readers
	txIdle   time.Duration // InTx: see WithTxIdleTimeout
	// lockTimeout bounds the waits for a record's lock of Checkpoint
	// and of InTx (see WithLockTimeout).
	lockTimeout time.Duration
	readOnly    bool          // WithReadOnly
	dialStagger time.Duration // WithDialStagger (Open's pool only)
}

// WithSchema sets the schema of the store's tables (default "herd"):
// stores with different schemas share a database without seeing each
// other. 1 to 48 lower-case letters, digits and underscores, not starting
// with a digit or pg_. Given to Open, it overrides the URL's schema option.
func WithSchema(name string) Option { return func(c *config) { c.schema = name } }

// WithReadOnly opens the store for a tool that only reads it (herd
// status): Open creates and upgrades nothing, so a database role with
// only USAGE and SELECT on the schema can read it. A schema that does not
// hold this version's tables (nothing written there yet, or by an older
// herd) is an error wrapping fs.ErrNotExist. Calls that write fail as the
// role's grants say.
func WithReadOnly() Option { return func(c *config) { c.readOnly = true } }

// WithLogLimit sets how many entries of each group's log the store keeps
// at least (default DefaultLogLimit; up to a quarter more between trims).
// A reader further behind gets store.ErrVersionGone. n < 1 is read as 1.
func WithLogLimit(n int) Option { return func(c *config) { c.logLimit = max(n, 1) } }

// WithListen turns LISTEN/NOTIFY wake-ups of Changes on (the default) or
// off. Off, a Changes call waiting at the end of the log reads it every
// poll interval; that is also what happens while LISTEN is not working.
// Turn it off behind a pooler in transaction mode (PgBouncer), where
// LISTEN cannot work: the store finds that out itself, after a few seconds.
func WithListen(on bool) Option { return func(c *config) { c.listen = on } }

// DefaultTxIdleTimeout is how long an InTx transaction may wait for its
// function's next statement before the server ends it (see
// WithTxIdleTimeout).
const DefaultTxIdleTimeout = time.Second

// WithTxIdleTimeout bounds how long an InTx transaction may sit idle, the
// server waiting for the next statement of its function, before the server
// ends the connection and with it the transaction (PostgreSQL's
// idle_in_transaction_session_timeout, set for the transaction only;
// default DefaultTxIdleTimeout, from 10ms to 1h). The transaction locks its
// partition's record: without the bound, a member stopped in the middle of
// one (SIGSTOP, a long pause, a network cut) would hold that lock until it
// resumed, and the expiry of its session, then every claim, release and
// renewal of the group, would wait behind it. Set it above the longest a
// function computes between two statements.
func WithTxIdleTimeout(d time.Duration) Option {
	return func(c *config) {
		if d >= 10*time.Millisecond && d <= time.Hour {
			c.txIdle = d
		}
	}
}

// DefaultLockTimeout is how long Checkpoint and InTx wait for the lock of
// a partition's record (see WithLockTimeout). Half the default session TTL:
// the holders it waits behind are the record's other Checkpoints and
// claims, each a moment, or an InTx of the same session (which a stalled
// process holds until its session ends and a claim ends it); on a starved
// machine 8 writers of one record queued for more than 2 s.
const DefaultLockTimeout = 5 * time.Second

// WithLockTimeout bounds how long Checkpoint and the start of InTx wait
// for the lock of a partition's record, which another InTx of the same
// partition may hold (PostgreSQL's lock_timeout, set for those statements
// only; default DefaultLockTimeout, from 10ms to 1h). A call that waits
// longer fails with store.ErrUnavailable and writes nothing. The store's
// other operations never wait for a record's lock (see InTx).
func WithLockTimeout(d time.Duration) Option {
	return func(c *config) {
		if d >= 10*time.Millisecond && d <= time.Hour {
			c.lockTimeout = d
		}
	}
}

// WithPollInterval sets how often a waiting Changes call reads the log
// when LISTEN is off or not working (default DefaultPollInterval).
func WithPollInterval(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.poll = d
		}
	}
}

// withBackstop sets how often a waiting Changes call reads the log while
// LISTEN works (tests make it long, to show that notifications wake it).
func withBackstop(d time.Duration) Option { return func(c *config) { c.backstop = d } }

// Store is a store.Store on PostgreSQL. It is safe for concurrent use.
type Store struct {
	pool     *pgxpool.Pool
	owned    bool // Close closes pool (Open made it)
	cfg      config
	schema   string
	qschema  string
	channel  string
	redacted string   // the URL without secrets ("" for New)
	secrets  []string // kept out of every message
	q        queries
	hub      *hub
	ghosts   store.Ghosts // sessions that failed opens may have opened
	logReads atomic.Int64 // reads of the log table by Changes (tests)
	ties     tieState     // session ties (tie.go)
	openWarm atomic.Bool  // warmOpen ran

	mu     sync.Mutex
	closed bool
}

// Open connects to the PostgreSQL server at rawURL, creates the store's
// schema, tables and functions if they are missing, and returns a Store.
//
//	postgres://[user[:password]@][host][:port][,host[:port]...][/database][?option=value&...]
//	postgresql://...
//
// herd's options in the query:
//
//	schema=name             the schema of herd's tables (default herd)
//	listen=on|off           LISTEN/NOTIFY wake-ups of Changes (default on)
//	poll_interval=500ms     how often a waiting Changes reads without them
//	log_limit=100000        entries kept of each group's log
//	tx_idle_timeout=1s      how long an InTx transaction may sit idle
//	record_lock_timeout=5s  how long Checkpoint and InTx wait for a record's lock
//	dial_stagger=200ms      how long a TCP connect waits before another attempt
//
// Every other option is pgx's (see pgxpool.ParseConfig and
// pgconn.ParseConfig): pool_max_conns, pool_min_conns, connect_timeout
// (in seconds; DefaultConnectTimeout, 5 s, if the URL sets none),
// sslmode, application_name, default_query_exec_mode (exec or
// simple_protocol behind a pooler that does not keep prepared statements),
// and so on. Options given to Open override the URL's.
//
// Open checks that the server runs PostgreSQL MinServerVersion or later
// and is not a read-only standby, and refuses a schema written by a newer
// version of herd (SchemaVersion). A malformed URL or an unusable server
// gives an error wrapping store.ErrInvalid, a server that cannot be reached
// one wrapping store.ErrUnavailable. Error messages never contain the
// password.
func Open(ctx context.Context, rawURL string, opts ...Option) (*Store, error) {
	if err := checkContext(ctx, "open"); err != nil {
		return nil, err
	}
	return open(ctx, rawURL, nil, opts...)
}

// open is Open whose connections are made by dial (nil: pgx's).
func open(ctx context.Context, rawURL string, dial pgconn.DialFunc, opts ...Option) (*Store, error) {
	t, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	pc, listenCfg, cfg, err := poolConfig(t, dial, opts)
	if err != nil {
		return nil, err
	}
	// No connection is opened ahead of need (pgx's pool_min_conns is 0
	// unless the URL sets it): members that start together would each open
	// spare connections, warmed up (warm.go), while they connect, and the
	// server serves those first. Ten members joining at once connected in
	// 0.06-0.16 s this way, against 0.25-0.37 s with two each opened ahead
	// (10 member processes joining 10, 2-core machine, PostgreSQL 15;
	// docs/benchmarks.md).
	//
	// The connection Open itself makes (to check the server and the
	// schema) is not warmed up: compiling every function there made Open
	// take 14-286 ms (median 146 ms) when 16 members opened their stores
	// at once, so their sessions opened over more than JoinSettle, and
	// members that planned before the last ones showed placed everything
	// twice (16 member processes on PostgreSQL). That connection
	// compiles each function when it first calls it; the pool's later
	// connections, made when calls overlap (a handoff's releases and
	// claims), are warmed up before they serve one.
	var started atomic.Bool
	if checkSchema(cfg.schema) == nil {
		warm := warmUp(buildQueries(quoteIdent(cfg.schema)))
		pc.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
			if !started.Load() {
				return nil
			}
			return warm(ctx, conn)
		}
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, parseErr(t, err)
	}
	s, err := newStore(pool, listenCfg, t.redacted, append(t.secrets, pc.ConnConfig.Password), append(t.opts, opts...))
	if err == nil {
		err = s.start(ctx)
	}
	if err != nil {
		pool.Close()
		return nil, err
	}
	started.Store(true)
	s.owned = true
	return s, nil
}

// New returns a Store on a pool the caller made (and closes: Close leaves
// it open), creating the schema if it is missing as Open does. The pool's
// connection settings are also used for the store's LISTEN connection.
func New(ctx context.Context, pool *pgxpool.Pool, opts ...Option) (*Store, error) {
	if err := checkContext(ctx, "New"); err != nil {
		return nil, err
	}
	if pool == nil {
		return nil, fmt.Errorf("pgstore: New was given a nil pool: %w", store.ErrInvalid)
	}
	s, err := newStore(pool, pool.Config().ConnConfig.Copy(), "", []string{pool.Config().ConnConfig.Password}, opts)
	if err != nil {
		return nil, err
	}
	if err := s.start(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// newStore makes a Store on pool whose LISTEN connection is made with lc.
func newStore(pool *pgxpool.Pool, lc *pgx.ConnConfig, redacted string, secrets []string, opts []Option) (*Store, error) {
	cfg := config{schema: DefaultSchema, logLimit: DefaultLogLimit, listen: true, poll: DefaultPollInterval, backstop: backstopInterval, txIdle: DefaultTxIdleTimeout,
		lockTimeout: DefaultLockTimeout}
	for _, o := range opts {
		o(&cfg)
	}
	if err := checkSchema(cfg.schema); err != nil {
		return nil, err
	}
	s := &Store{
		pool:     pool,
		cfg:      cfg,
		schema:   cfg.schema,
		qschema:  quoteIdent(cfg.schema),
		channel:  cfg.schema + "_changes",
		redacted: redacted,
	}
	for _, v := range secrets {
		// A password of fewer than 4 bytes cannot be told apart from the
		// text around it; longer ones are never shown.
		if len(v) >= 4 {
			s.secrets = append(s.secrets, v, url.PathEscape(v), url.QueryEscape(v))
		}
	}
	s.q = s.makeQueries()
	s.hub = newHub(s, lc)
	return s, nil
}

// start checks the server and installs the schema. On an installed
// schema that is one statement, in one round trip (probe); 16 member
// processes opening their stores at once each waited for 4 before (two
// statements, each prepared, then run).
func (s *Store) start(ctx context.Context) error {
	p, perr := s.probe(ctx)
	if perr != nil {
		// The schema missing, or the probe refused: the server's own
		// answers first, asked alone, so its errors come as they always did.
		err := s.pool.QueryRow(ctx, "SELECT current_setting('server_version_num')::int, pg_is_in_recovery()", s.oneTrip()...).Scan(&p.server, &p.standby)
		if err != nil {
			return s.connectErr(err)
		}
	}
	switch {
	case p.server < MinServerVersion*10000:
		return fmt.Errorf("pgstore: %s runs PostgreSQL %d.%d; herd needs %d or later: %w",
			s.where(), p.server/10000, p.server%10000, MinServerVersion, store.ErrInvalid)
	case p.standby:
		return fmt.Errorf("pgstore: %s is a read-only standby: point the URL at the primary (or list every host with target_session_attrs=read-write): %w",
			s.where(), store.ErrInvalid)
	}
	if err := s.ensureSchema(ctx, p, perr); err != nil {
		var ns newerSchema
		if errors.As(err, &ns) || errors.Is(err, store.ErrInvalid) {
			return err
		}
		return s.fail("creating the schema", err)
	}
	return nil
}

// oneTrip is the leading argument of a statement run once per store: it
// is sent with its arguments in one round trip, not prepared first (pgx's
// default), unless the URL asks for the simple protocol.
func (s *Store) oneTrip() []any {
	if s.pool.Config().ConnConfig.DefaultQueryExecMode == pgx.QueryExecModeSimpleProtocol {
		return nil
	}
	return []any{pgx.QueryExecModeExec}
}

func (s *Store) where() string {
	if s.redacted != "" {
		return s.redacted
	}
	return "the server"
}

func (s *Store) connectErr(err error) error {
	switch pgCode(err) {
	case "3D000", "42704", "22023":
		// no such database; an unknown setting or a bad value (pgx passes
		// every URL option it does not know to the server as a setting)
		return s.wrap(fmt.Sprintf("pgstore: connecting to %s", s.where()), err, store.ErrInvalid)
	}
	prefix := fmt.Sprintf("pgstore: connecting to %s", s.where())
	if cause := certCause(err); cause != "" {
		prefix += ": the server's certificate is not accepted: " + cause
	} else if strings.Contains(err.Error(), "server refused TLS connection") {
		// pgx's words when the server answers the TLS request with "no"
		prefix += ": the server does not offer TLS, which the URL's sslmode requires (set ssl = on and a certificate on the server)"
	}
	return s.wrap(prefix, err, store.ErrUnavailable)
}

// Close stops the store's LISTEN connection and, if the store was made by
// Open, closes its pool. Sessions are not closed.
// Calls after Close fail with store.ErrUnavailable.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.hub.close()
	if s.owned {
		s.pool.Close()
	}
	return nil
}

// Pool is the store's connection pool, for callers that keep their own
// tables next to herd's (see InTx).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }
