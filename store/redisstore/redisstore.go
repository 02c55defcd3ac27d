package redisstore

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
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
	owned  bool      // Close closes client (Open made it)
	prefix string    // validated key prefix
	err    error     // a bad option given to New: every call returns it
	log    logConfig // see log.go

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
// handlers only after its session has expired.
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
	t, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	if t.prefix != "" {
		opts = append([]Option{WithPrefix(t.prefix)}, opts...)
	}
	routeGoRedisLogs()
	client, dial, timeout := newClient(t)
	s := New(client, opts...)
	s.owned = true
	if s.err != nil {
		_ = client.Close()
		return nil, s.err
	}
	// The checks answer in milliseconds: a server that stays mute is
	// reported within twice the dial timeout (a call's own read timeout,
	// defaultIOTimeout, is for large reads).
	if timeout <= 0 {
		timeout = defaultDialTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, 2*timeout)
	defer cancel()
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
		return s.client.Close()
	}
	return nil
}

// keys are the names of one group's keys. The group id is base64url-encoded
// inside one hash tag, so any id (braces, colons, spaces, ...) yields valid,
// distinct names that Redis Cluster maps to one slot.
type keys struct {
	sessions, members, partitions, owners, checkpoints string
	partset, partlist, givenback, setinfo              string // see scripts.go
	epochat, ckptat                                    string // see scripts.go
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
		log:         base + "log",
		version:     base + "version",
	}
}

// begin checks what every call checks: the arguments (args is the error
// of the store.Validate function of op, nil if valid), the store's own
// state and the context.
func (s *Store) begin(ctx context.Context, op string, args error) error {
	if args != nil {
		return fmt.Errorf("redisstore: %s: %w", op, args)
	}
	if s.err != nil {
		return s.err
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return fmt.Errorf("redisstore: %s: store is closed: %w", op, store.ErrUnavailable)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("redisstore: %s: %w: %w", op, store.ErrUnavailable, err)
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

// OpenSession implements store.Store.
func (s *Store) OpenSession(ctx context.Context, group, member string, weight int, ttl time.Duration) (string, error) {
	if err := s.begin(ctx, "OpenSession", store.ValidateOpenSession(group, member, weight, ttl)); err != nil {
		return "", err
	}
	k := s.keys(group)
	meta := strconv.Itoa(weight) + ":" + member
	for range 3 {
		id := store.NewSessionID()
		status, _, err := s.runLogged(ctx, "OpenSession", openScript, k, []string{k.sessions, k.members},
			id, ttlMicros(ttl), meta)
		if err != nil {
			return "", err
		}
		switch status {
		case "ok":
			return id, nil
		case "dup":
			continue
		default:
			return "", unexpected("OpenSession", status)
		}
	}
	return "", fmt.Errorf("redisstore: OpenSession: random session ids collided three times")
}

// KeepAlive implements store.Store. Besides renewing the session it removes
// sessions it finds expired and logs them, so a crashed member's departure
// reaches the group within one renewal interval of any member; in the
// steady state it logs nothing.
func (s *Store) KeepAlive(ctx context.Context, group, session string, ttl time.Duration) (time.Duration, error) {
	if err := s.begin(ctx, "KeepAlive", store.ValidateKeepAlive(group, session, ttl)); err != nil {
		return 0, err
	}
	k := s.keys(group)
	status, res, err := s.runLogged(ctx, "KeepAlive", keepAliveScript, k, []string{k.sessions, k.members},
		session, ttlMicros(ttl))
	if err != nil {
		return 0, err
	}
	switch status {
	case "ok":
		return micros(str(res, 0)), nil
	case "expired":
		return 0, fmt.Errorf("redisstore: KeepAlive of session %q: %w", session, store.ErrSessionExpired)
	}
	return 0, unexpected("KeepAlive", status)
}

// CloseSession implements store.Store.
func (s *Store) CloseSession(ctx context.Context, group, session string) error {
	if err := s.begin(ctx, "CloseSession", store.ValidateCloseSession(group, session)); err != nil {
		return err
	}
	k := s.keys(group)
	status, _, err := s.runLogged(ctx, "CloseSession", closeScript, k, []string{k.sessions, k.members}, session)
	if err != nil {
		return err
	}
	if status != "ok" {
		return unexpected("CloseSession", status)
	}
	return nil
}

// SetPartitions implements store.Store. A set of more than
// smallSet partitions is sent in two steps: its digest first, which is all
// the store needs when the set stored is the same (or is kept), then the
// whole set only if the store asks for it. So a hundred members joining
// with the same set of 100,000 partitions send it whole only while none is
// stored (a fresh group), and the store writes it once.
func (s *Store) SetPartitions(ctx context.Context, group string, ps store.PartitionSet) (store.SetResult, error) {
	if err := s.begin(ctx, "SetPartitions", store.ValidateSetPartitions(group, ps)); err != nil {
		return store.SetResult{}, err
	}
	k := s.keys(group)
	mode, digest := "replace", ""
	switch ps.Mode {
	case store.SetIfAbsent:
		mode = "ifabsent"
	case store.SetKindOnly:
		mode = "kindonly"
	}
	if ps.Mode != store.SetKindOnly {
		digest = store.Digest(ps.Partitions)
	}
	ks := []string{k.partitions, k.partset, k.partlist, k.setinfo}
	full := ps.Mode != store.SetKindOnly && len(ps.Partitions) <= smallSet
	for {
		args := []any{ps.Kind, mode, digest, "0"}
		if full {
			args[3] = "1"
			args = append(args, encodePartList(ps.Partitions))
			for _, p := range ps.Partitions {
				args = append(args, p.ID, strconv.Itoa(p.Weight))
			}
		}
		status, res, err := s.runLogged(ctx, "SetPartitions", setPartitionsScript, k, ks, args...)
		if err != nil {
			return store.SetResult{}, err
		}
		r := store.SetResult{Kind: str(res, 0), Stored: str(res, 1) == "1"}
		switch {
		case status == "kind":
			return r, fmt.Errorf("redisstore: SetPartitions: %w", store.KindError(group, r.Kind, ps.Kind))
		case status == "need" && !full:
			full = true
			continue
		case status != "ok":
			return store.SetResult{}, unexpected("SetPartitions", status)
		}
		switch str(res, 2) {
		case "same":
			r.Same = true
		case "written", "replaced":
			r.Same, r.Written, r.Replaced = true, true, str(res, 2) == "replaced"
		}
		return r, nil
	}
}

// smallSet is the largest partition set SetPartitions sends whole at once:
// a smaller one costs less to send than a second round trip.
const smallSet = 100

// Snapshot implements store.Store, in two steps: a script expires the due
// sessions (logging them) and answers the server's time; then one
// MULTI/EXEC reads the sessions that expire after that time, the partition
// set, the records and the log's version, one consistent read. A session
// that expires between the two steps is shown live (with no time left):
// its expiry is not in the log at the version read, and whoever logs it
// next makes every replica drop it. It does not read the checkpoints.
//
// The read is not part of the script because a script's replies go
// through Lua: reading 100,000 records in one costs the server about six
// times what the same commands cost in a transaction (82 ms against 12 ms
// for a partition set of 100,000 on a 2-core AMD EPYC, Redis 7.0.15), and
// every member reads the group when it starts.
func (s *Store) Snapshot(ctx context.Context, group string) (*store.Snapshot, error) {
	if err := s.begin(ctx, "Snapshot", store.ValidateGroup(group)); err != nil {
		return nil, err
	}
	k := s.keys(group)
	ks, args := s.logArgs(k, []string{k.sessions, k.members})
	res, err := s.eval(ctx, pruneScript, ks, args...)
	if err != nil {
		return nil, fail("Snapshot", err)
	}
	after := str(res, 0)
	if !allDigits(after) {
		return nil, unexpected("Snapshot", after)
	}
	// The partition set from partlist, one string; from the partitions
	// hash (a second read) if a version before partlist wrote the set, or
	// partlist is missing or does not decode.
	r, err := s.readGroup(ctx, k, after, true)
	if err == nil && !r.listed {
		r, err = s.readGroup(ctx, k, after, false)
	}
	if err != nil {
		return nil, fail("Snapshot", err)
	}
	return decodeSnapshot(k, r)
}

// groupRead is what Snapshot's transaction reads.
type groupRead struct {
	now     time.Time // the server's time in the transaction
	live    []redis.Z // sessions expiring after the prune's time, with their expiry in µs
	metas   map[string]string
	parts   map[string]string // the partitions hash (read without the list)
	list    []store.Partition // partlist, decoded (listed)
	listed  bool              // the set was read from partlist
	owners  hashReply         // the owners hash, as HGETALL's raw reply
	marks   map[string]string // givenback
	partset bool              // the partset key exists
	kind    string            // the group's kind (setinfo), "" if none
	version string            // "" if none, or not a string
}

// readGroup reads the group in one MULTI/EXEC (all its keys share one hash
// slot): the sessions whose expiry is after after (µs), the members, the
// partition set, the records, the GivenBack marks and the log's version.
// With list, the partition set is read from partlist (one string), and
// r.listed says whether it could be: partset says partlist holds the set
// and it decodes; without, from the partitions hash.
func (s *Store) readGroup(ctx context.Context, k keys, after string, list bool) (groupRead, error) {
	var r groupRead
	read := func() error {
		var (
			tm                  *redis.TimeCmd
			live                *redis.ZSliceCmd
			metas, marks        *redis.MapStringStringCmd
			parts               *redis.MapStringStringCmd
			owners              *redis.RawWriteToCmd
			ownersRaw           replyWriter
			partset, plist, ver *redis.StringCmd
			kind                *redis.StringCmd
		)
		_, _ = s.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
			tm = p.Time(ctx)
			live = p.ZRangeByScoreWithScores(ctx, k.sessions, &redis.ZRangeBy{Min: "(" + after, Max: "+inf"})
			metas = p.HGetAll(ctx, k.members)
			if list {
				plist = p.Get(ctx, k.partlist)
			} else {
				parts = p.HGetAll(ctx, k.partitions)
			}
			owners = redis.NewRawWriteToCmd(ctx, &ownersRaw, "hgetall", k.owners)
			_ = p.Process(ctx, owners)
			partset = p.Get(ctx, k.partset)
			kind = p.HGet(ctx, k.setinfo, "kind")
			ver = p.Get(ctx, k.version)
			marks = p.HGetAll(ctx, k.givenback)
			return nil
		})
		// Every command's own error (the transaction's failure is every
		// command's), but those of the strings: a version key this store
		// did not write (missing, or of another kind) reads as no log, and
		// the next write starts a new history; partset and partlist are
		// judged below.
		cmds := []redis.Cmder{tm, live, metas, owners, marks}
		if !list {
			cmds = append(cmds, parts)
		}
		for _, c := range cmds {
			if err := c.Err(); err != nil {
				return s.redirected(err)
			}
		}
		for _, c := range []*redis.StringCmd{ver, partset, plist, kind} {
			if c == nil {
				continue
			}
			if err := c.Err(); err != nil && !errors.Is(err, redis.Nil) && !isRedisError(err) {
				return s.redirected(err)
			}
		}
		r.version, _ = ver.Result()
		r.kind, _ = kind.Result()
		r.now, r.live = tm.Val(), live.Val()
		r.metas, r.marks = metas.Val(), marks.Val()
		h, err := newHashReply(ownersRaw.b)
		if err != nil {
			return s.redirected(err)
		}
		r.owners = h
		ps, err := partset.Result()
		r.partset = err == nil
		if list {
			if v, err := plist.Result(); err == nil && ps == "2" {
				r.list, r.listed = decodePartList(v)
			}
		} else {
			r.parts = parts.Val()
		}
		return nil
	}
	if err := await(ctx, read); err != nil {
		return groupRead{}, err
	}
	return r, nil
}

// isRedisError reports whether err is an error reply of the server (as
// WRONGTYPE), not a failure to reach it.
func isRedisError(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr)
}

// await runs f, and returns when it returns or when ctx ends, whichever
// comes first: go-redis does not interrupt a command under way when its
// context is cancelled.
func await(ctx context.Context, f func() error) error {
	if ctx.Done() == nil {
		return f()
	}
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// decodeSnapshot decodes what Snapshot read. A record that does not decode
// (written by hand, by another program or version) is left out and listed
// in Snapshot.Malformed: one bad record never fails the whole read.
func decodeSnapshot(k keys, r groupRead) (*store.Snapshot, error) {
	now := r.now.UnixMicro()
	metas := r.metas
	// The GivenBack marks (see mark).
	var marks map[string]string
	if len(r.marks) > 0 {
		marks = make(map[string]string, len(r.marks))
		for p, v := range r.marks {
			if m := mark(v); m != "" {
				marks[p] = m
			}
		}
	}

	snap := &store.Snapshot{
		Sessions:   make([]store.SessionInfo, 0, len(r.live)),
		Partitions: make([]store.Partition, 0, len(r.parts)),
	}
	bad := func(kind, key, id, format string, args ...any) {
		snap.Malformed = append(snap.Malformed, store.Malformed{
			Kind:   kind,
			ID:     capID(id),
			Reason: fmt.Sprintf("key %q: ", key) + fmt.Sprintf(format, args...),
		})
	}
	for _, z := range r.live {
		id, _ := z.Member.(string)
		exp := z.Score
		if !store.IsSessionID(id) {
			// Written by hand or by another program: a session no member
			// opened would be given partitions it never claims.
			bad(store.MalformedSession, k.sessions, id, "not a session id this store makes (26 characters of A-Z, 2-7)")
			continue
		}
		m, ok := metas[id]
		if !ok {
			bad(store.MalformedSession, k.members, id, "live session has no member record")
			continue
		}
		weight, member, ok := parseMeta(m)
		if !ok {
			bad(store.MalformedSession, k.members, id, "value %q is not <weight>:<member>", abbrev(m))
			continue
		}
		if err := store.ValidateID("member", member); err != nil {
			bad(store.MalformedSession, k.members, id, "%v", err)
			continue
		}
		// Expired between the prune and the read (see Snapshot): none left.
		left := time.Duration(0)
		if us := exp - float64(now); us >= float64(math.MaxInt64/int64(time.Microsecond)) {
			left = time.Duration(math.MaxInt64)
		} else if us > 0 {
			left = time.Duration(us) * time.Microsecond
		}
		snap.Sessions = append(snap.Sessions, store.SessionInfo{
			ID:        id,
			Member:    member,
			Remaining: left,
			Weight:    weight,
		})
	}
	// A non-empty hash is a stored set even without partset (written by a
	// version before partset existed).
	snap.PartitionSetStored = r.partset || len(r.parts) > 0 || len(r.list) > 0
	snap.Kind = r.kind
	if r.listed {
		snap.Partitions = r.list // sorted, checked
	}
	// A version key this store did not write reads as no log: the next
	// write starts a new history.
	snap.Version, _ = parseVersion(r.version)
	for p, w := range r.parts {
		if err := store.ValidateID("partition", p); err != nil {
			bad(store.MalformedPartition, k.partitions, p, "%v", err)
			continue
		}
		weight, err := strconv.Atoi(w)
		if err != nil || weight < 0 || !allDigits(w) {
			bad(store.MalformedPartition, k.partitions, p, "weight %q is not a non-negative integer", abbrev(w))
			continue
		}
		snap.Partitions = append(snap.Partitions, store.Partition{ID: p, Weight: weight})
	}
	slices.SortFunc(snap.Sessions, func(a, b store.SessionInfo) int { return strings.Compare(a.ID, b.ID) })
	if !r.listed {
		slices.SortFunc(snap.Partitions, func(a, b store.Partition) int { return strings.Compare(a.ID, b.ID) })
	}
	owners, err := decodeOwners(k, r.owners, snap.Partitions, marks, bad)
	if err != nil {
		return nil, err
	}
	snap.Owners = owners
	slices.SortFunc(snap.Malformed, func(a, b store.Malformed) int {
		if c := strings.Compare(a.Kind, b.Kind); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return snap, nil
}

// decodeOwners returns the records of owners (the raw reply of HGETALL on
// the owners hash), sorted by partition, with the GivenBack marks, and
// reports through bad those that do not decode. parts is the partition set,
// sorted by id.
//
// The reply is read once, in the server's order, each value decoded to its
// epoch and holder and put at the position of its partition in parts,
// found through an index of parts; the records are then made in the order
// of parts. Sorting 100,000 records by partition was a third of the
// client's CPU time of a Snapshot (BenchmarkSnapshot100k). A record's
// Partition is the set's own string, and its Session and Member are shared
// by every record of the same holder: nothing is kept of the reply. Only
// the records of partitions outside the set (left by a set that shrank)
// are sorted, and merged in.
func decodeOwners(k keys, owners hashReply, parts []store.Partition, marks map[string]string, bad func(kind, key, id, format string, args ...any)) ([]store.Ownership, error) {
	// holders: the part of a value after its epoch ("<session>:<member>"),
	// decoded once per distinct value: a group of 100,000 records has as
	// many of them as it has sessions.
	type holder struct{ session, member, bad string }
	var hs []holder
	holders := map[string]int32{}
	// decode returns the epoch and the index in hs of v's holder, or
	// reports v as malformed and returns -1.
	decode := func(p string, v []byte) (uint64, int32) {
		epoch, rest, ok := parseEpoch(v)
		if !ok {
			bad(store.MalformedOwnership, k.owners, p, "value %q %s", abbrev(string(v)), notRecord)
			return 0, -1
		}
		h, seen := holders[string(rest)]
		if !seen {
			var x holder
			r := string(rest)
			x.session, x.member, x.bad = parseHolder(r)
			h = int32(len(hs))
			hs = append(hs, x)
			holders[r] = h
		}
		if hs[h].bad != "" {
			bad(store.MalformedOwnership, k.owners, p, "value %q %s", abbrev(string(v)), hs[h].bad)
			return 0, -1
		}
		return epoch, h
	}
	record := func(p string, epoch uint64, h int32) store.Ownership {
		return store.Ownership{Partition: p, Session: hs[h].session, Member: hs[h].member, Epoch: epoch, GivenBack: marks[p]}
	}
	// at[i]: the record of parts[i], if holder > 0 (the holder's index
	// plus one).
	type slot struct {
		epoch  uint64
		holder int32
	}
	var at []slot
	if owners.len() > 0 {
		at = make([]slot, len(parts))
	}
	index := indexParts(parts)
	var strays []store.Ownership
	found := 0
	var batch partBatch
	flush := func() {
		batch.lookup(index, parts)
		for j := range batch.n {
			e := &batch.entries[j]
			var p string
			if e.part >= 0 {
				p = parts[e.part].ID
			} else {
				p = string(e.key)
				if err := store.ValidateID("partition", p); err != nil {
					bad(store.MalformedOwnership, k.owners, p, "%v", err)
					continue
				}
			}
			epoch, h := e.epoch, e.holder
			if h < 0 {
				// A holder not seen yet, or a malformed value: reported
				// with its partition's id.
				if epoch, h = decode(p, e.val); h < 0 {
					continue
				}
			}
			if e.part < 0 {
				strays = append(strays, record(p, epoch, h))
				continue
			}
			if at[e.part].holder == 0 {
				found++
			}
			at[e.part] = slot{epoch, h + 1}
		}
		batch.n = 0
	}
	for {
		key, v, ok, err := owners.next()
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		e := &batch.entries[batch.n]
		batch.n++
		e.key, e.val, e.holder = key, v, -1
		if epoch, rest, ok := parseEpoch(v); ok {
			if h, seen := holders[string(rest)]; seen && hs[h].bad == "" {
				e.epoch, e.holder = epoch, h
			}
		}
		if batch.n == len(batch.entries) {
			flush()
		}
	}
	flush()
	out := make([]store.Ownership, 0, found)
	for i := range at {
		if s := at[i]; s.holder > 0 {
			out = append(out, record(parts[i].ID, s.epoch, s.holder-1))
		}
	}
	if len(strays) == 0 {
		return out, nil
	}
	// Records of partitions outside the set: sorted, and merged in.
	slices.SortFunc(strays, func(a, b store.Ownership) int { return strings.Compare(a.Partition, b.Partition) })
	merged := make([]store.Ownership, 0, len(out)+len(strays))
	i := 0
	for _, o := range out {
		for i < len(strays) && strays[i].Partition < o.Partition {
			merged = append(merged, strays[i])
			i++
		}
		merged = append(merged, o)
	}
	return append(merged, strays[i:]...), nil
}

// capID cuts an id read from the store to MaxIDLength bytes, for a
// Malformed record: a field may be as long as Redis allows.
func capID(id string) string {
	if len(id) > store.MaxIDLength {
		return id[:store.MaxIDLength]
	}
	return id
}

// corrupt is the error of a call that meets a record it cannot decode.
func corrupt(key, field, format string, args ...any) error {
	return fmt.Errorf("redisstore: key %q field %q: %s: %w", key, field, fmt.Sprintf(format, args...), store.ErrCorrupt)
}

func abbrev(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// parseMeta decodes a members value "<weight>:<member>".
func parseMeta(v string) (weight int, member string, ok bool) {
	w, member, found := strings.Cut(v, ":")
	if !found || !allDigits(w) {
		return 0, "", false
	}
	weight, err := strconv.Atoi(w)
	if err != nil {
		return 0, "", false
	}
	return weight, member, true
}

// parseRecord decodes an owners value "<epoch>:<session>:<member>" with the
// same rules as the scripts' parse: a canonical decimal epoch in 1..2^64-1
// (parseEpoch), then a session and member as parseHolder accepts them. bad
// says why a value is malformed ("" if it is not).
func parseRecord(v string) (epoch uint64, session, member, bad string) {
	epoch, rest, ok := parseEpoch(v)
	if !ok {
		return 0, "", "", notRecord
	}
	session, member, bad = parseHolder(rest)
	return epoch, session, member, bad
}

// notRecord is why a value that is not "<epoch>:<session>:<member>" is
// malformed.
const notRecord = "is not <epoch>:<session>:<member>"

// parseEpoch splits an owners value at its epoch: the epoch, a canonical
// decimal in 1..2^64-1, and the rest, which names the holder. A Snapshot
// parses the bytes of HGETALL's raw reply (rawhash.go), other reads
// strings.
func parseEpoch[T string | []byte](v T) (epoch uint64, rest T, ok bool) {
	i := 0
	for i < len(v) && v[i] != ':' {
		i++
	}
	if i == 0 || i == len(v) || v[0] == '0' {
		return 0, rest, false
	}
	for j := range i {
		c := v[j]
		if c < '0' || c > '9' {
			return 0, rest, false
		}
		d := uint64(c - '0')
		if epoch > (^uint64(0)-d)/10 {
			return 0, rest, false // above 2^64-1
		}
		epoch = epoch*10 + d
	}
	return epoch, v[i+1:], true
}

// parseHolder decodes the part of an owners value after its epoch,
// "<session>:<member>" (both empty for a released record), and says why it
// is malformed ("" if it is not).
func parseHolder(rest string) (session, member, bad string) {
	session, member, found := strings.Cut(rest, ":")
	switch {
	case !found:
		return "", "", notRecord
	case session != "" && (store.ValidateID("session", session) != nil || store.ValidateID("member", member) != nil),
		session == "" && member != "":
		return "", "", "names a malformed session or member"
	}
	return session, member, ""
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// Checkpoint implements store.Store.
func (s *Store) Checkpoint(ctx context.Context, group, partition string, epoch uint64, value []byte) error {
	if err := s.begin(ctx, "Checkpoint", store.ValidateCheckpoint(group, partition, epoch, value)); err != nil {
		return err
	}
	if value == nil {
		value = []byte{}
	}
	k := s.keys(group)
	status, _, err := s.run(ctx, "Checkpoint", checkpointScript, []string{k.sessions, k.owners, k.checkpoints, k.ckptat},
		partition, strconv.FormatUint(epoch, 10), value)
	if err != nil {
		return err
	}
	switch status {
	case "ok":
		return nil
	case "notowner":
		return fmt.Errorf("redisstore: Checkpoint of %q at epoch %d: %w", partition, epoch, store.ErrNotOwner)
	}
	return unexpected("Checkpoint", status)
}

// Restore implements store.Store.
func (s *Store) Restore(ctx context.Context, group, partition string, epoch uint64, value []byte) error {
	if err := s.begin(ctx, "Restore", store.ValidateCheckpoint(group, partition, epoch, value)); err != nil {
		return err
	}
	if value == nil {
		value = []byte{}
	}
	k := s.keys(group)
	status, _, err := s.runLogged(ctx, "Restore", restoreScript, k, []string{k.owners, k.checkpoints, k.epochat, k.ckptat, k.givenback},
		partition, strconv.FormatUint(epoch, 10), value)
	if err != nil {
		return err
	}
	switch status {
	case "ok":
		return nil
	case "notowner":
		return fmt.Errorf("redisstore: Restore of %q: the partition has an owned record or one with an epoch as high: %w", partition, store.ErrNotOwner)
	}
	return unexpected("Restore", status)
}
