package etcdstore

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/herdhq/herd/store"
)

// Defaults.
const (
	// DefaultPrefix is the key prefix of every key the store writes.
	DefaultPrefix = "herd/"
	// DefaultLogLimit is how many entries of each group's log are kept at
	// least; a reader further behind takes a new snapshot.
	DefaultLogLimit = 10000
	// maxOps bounds the compares and the operations of one transaction
	// under etcd's default --max-txn-ops of 128.
	maxOps = 120
	// claimChunk is how many partitions one transaction of a ClaimBatch
	// of at most as many handles: a compare, a write, a read of the record
	// and one of its checkpoint each (the write reads the checkpoints it
	// hands over, at its own revision: a rebalance's claim is two round
	// trips, not three), with the session's, the sequence's, the log's and
	// the trim's beside them (the log entries of a transaction are one
	// key). A claim's compares of the owners it takes over from may end
	// its transaction earlier.
	claimChunk = 58
	// batchChunk is how many partitions one transaction of a ReleaseBatch,
	// or of a larger ClaimBatch (a placement's, whose checkpoints are read
	// after), handles: a compare, a write and a read each, with the others
	// as claimChunk's. Fewer, larger transactions place 16 x 10,000
	// faster than claimChunk's.
	batchChunk = 100
	// expireChunk is how many expired sessions one transaction logs: two
	// compares and a delete each.
	expireChunk = 50
	// readChunk is how many partitions one read of Records asks for (two
	// gets each).
	readChunk = 60
	// requestBytes bounds what one transaction writes, under etcd's
	// default --max-request-bytes of 1.5 MiB.
	requestBytes = 1 << 20
	// requestTimeout bounds a clean-up call made after the caller's
	// context ended.
	requestTimeout = 5 * time.Second
	// maxWait bounds how long one Changes call waits for an entry. A
	// watch costs nothing while it waits (the client's keep-alive pings,
	// 10 s, find a dead connection), so a member at rest makes one call
	// per maxWait: 0.003 per second.
	maxWait = 5 * time.Minute
)

// Option configures a Store.
type Option func(*Store)

// WithPrefix sets the key prefix (default DefaultPrefix): stores with
// different prefixes share a cluster without seeing each other.
func WithPrefix(p string) Option { return func(s *Store) { s.prefix = p } }

// WithLogLimit sets how many entries of each group's log are kept (at
// least 1; default DefaultLogLimit).
func WithLogLimit(n int) Option { return func(s *Store) { s.logLimit = max(n, 1) } }

// Store is the etcd backend. Create it with New or Open.
type Store struct {
	c        *clientv3.Client
	own      bool        // Close closes c
	conns    *conns      // c's connections, if Open dialled them
	tls      *tls.Config // of an etcds:// URL, for ServerCPU's reads of /metrics
	prefix   string
	logLimit int

	mu     sync.Mutex
	leases map[string]lease // sessions this store opened or renewed
	ghosts store.Ghosts     // sessions that failed opens may have opened

	tails tails    // the tagged entries of pending keys (pending.go)
	seqs  seqLater // the sequencing of the pending keys it wrote (seqlater.go)
	hints logHints // what its last read of each group's log found (logread.go)
	// watches are the watches its readers wait on (watch.go), each
	// ended once unused for watchIdle.
	watches   logWatches
	watchIdle time.Duration
	// conflicts counts the writes whose compares failed (another write
	// came between their read and their transaction).
	conflicts atomic.Int64

	// background counts the revocations (revokeLater) and sequencings
	// (sequenceLater) under way; closing is cancelled by Close, which then
	// waits for them. closed (under backgroundMu) keeps one from starting
	// once Close waits (goBackground).
	backgroundMu sync.Mutex
	closed       bool
	background   sync.WaitGroup
	closing      context.Context
	close        context.CancelFunc

	beforeOpenCommit func() // tests: called before an open's transaction
	afterCloseCommit func() // tests: called after a close's transaction
	beforeSequence   func() // tests: called before a sequencing
}

// lease is what a store remembers of a session it renewed: the lease that
// keeps it alive and the TTL it was granted for.
type lease struct {
	id  clientv3.LeaseID
	ttl time.Duration
}

var (
	_ store.Store       = (*Store)(nil)
	_ store.GroupLister = (*Store)(nil)
)

// New returns a store on client c, which the caller keeps and closes.
func New(c *clientv3.Client, opts ...Option) *Store {
	s := &Store{c: c, prefix: DefaultPrefix, logLimit: DefaultLogLimit, leases: map[string]lease{}, watchIdle: watchIdle}
	s.closing, s.close = context.WithCancel(context.Background())
	for _, o := range opts {
		o(s)
	}
	return s
}

// Close cancels the lease revocations and the sequencings under way and
// waits for them, then closes the client if the store opened it (Open),
// and ends the watchers of its connections' handshakes (conn.go). Sessions
// are not touched: they end with their TTL.
func (s *Store) Close() error {
	s.backgroundMu.Lock()
	s.closed = true
	s.backgroundMu.Unlock()
	s.close()
	s.background.Wait()
	var err error
	if s.own {
		err = s.c.Close()
	}
	if s.conns != nil {
		s.conns.stop()
	}
	return err
}

// goBackground runs f in a goroutine that Close waits for, unless Close
// has begun: then it reports false and runs nothing.
func (s *Store) goBackground(f func()) bool {
	s.backgroundMu.Lock()
	defer s.backgroundMu.Unlock()
	if s.closed {
		return false
	}
	s.background.Add(1)
	go func() {
		defer s.background.Done()
		f()
	}()
	return true
}

// Keys. Under the store's prefix P, a group's keys begin with its own
// prefix G = P g/<group, path-escaped>/ (so that no group's prefix is
// another's); P i/<group> lists the group for Groups.
//
//	G q           the log's sequence: {seq, tag} of the last sequenced entry
//	G k           the group's kind and partition set: which set, its digest
//	G l/<seq>     sequenced log entries, up to seq (20 digits)
//	G u/<random>  pending log entries, after the sequenced ones (pending.go)
//	G m/<session> a session as logged: member, weight, TTL, lease
//	G s/<session> the session's liveness: a key on its lease
//	G r/<id>      a partition's ownership record
//	G c/<id>      its checkpoint
//	G o/<id>      its latest load (ReportLoads; store.FormatLoad)
//	G p/<set>/<n> the partition set, in chunks
func (s *Store) groupKey(group string) string {
	return s.prefix + "g/" + url.PathEscape(group) + "/"
}

func (s *Store) indexKey(group string) string { return s.prefix + "i/" + url.PathEscape(group) }

func logKey(g string, seq uint64) string { return fmt.Sprintf("%sl/%020d", g, seq) }

// failure wraps err, from etcd or the context, as the contract's error.
func failure(op string, err error) error {
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("etcdstore: %s: %w (%w)", op, store.ErrUnavailable, err)
	case errors.Is(err, rpctypes.ErrGRPCNoLeader), errors.Is(err, rpctypes.ErrNoLeader):
		return fmt.Errorf("etcdstore: %s: the etcd cluster has no leader: %w (%v)", op, store.ErrUnavailable, err)
	}
	return fmt.Errorf("etcdstore: %s: %w (%v)", op, store.ErrUnavailable, err)
}

// retry runs attempt until it reports done, an error, or ctx ends: an
// attempt reads, decides and commits a transaction that compares what it
// read, and reports not done when another write came between.
func retry(ctx context.Context, op string, attempt func() (bool, error)) error {
	for i := 0; ; i++ {
		if err := ctx.Err(); err != nil {
			return failure(op, err)
		}
		done, err := attempt()
		if err != nil || done {
			return err
		}
		// Writers of one group take turns on its sequence, and a failed
		// compare costs the cluster a write of its own (a transaction goes
		// through Raft): back off, more each time, at random.
		d := time.Duration(rand.Int64N(int64(2*time.Millisecond) << min(i, 6)))
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return failure(op, ctx.Err())
		}
	}
}

// withLeader is ctx for calls that must not wait for a cluster without a
// leader (a member cut off with a minority of etcd nodes).
func withLeader(ctx context.Context) context.Context { return clientv3.WithRequireLeader(ctx) }

// now is the clock of epochs and record times: etcd has none its clients
// can read (see docs/etcd.md).
var now = time.Now

func hasPrefix(k []byte, p string) bool { return strings.HasPrefix(string(k), p) }

// checkContext is every exported call's first check: a nil ctx is an
// invalid argument, refused before anything reads it (it would panic).
func checkContext(ctx context.Context, op string) error {
	if ctx == nil {
		return fmt.Errorf("etcdstore: %s: nil context (pass context.Background() or a call's own): %w", op, store.ErrInvalid)
	}
	return nil
}
