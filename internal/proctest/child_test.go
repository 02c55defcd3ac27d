package proctest

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/etcdstore"
	"github.com/herdhq/herd/store/pgstore"
	"github.com/herdhq/herd/store/redisstore"
	"github.com/herdhq/herd/store/sqlitestore"
)

// Environment of a child process (the test binary re-executed with
// -test.run=^TestChild$).
const (
	envChild      = "HERD_PROCTEST_CHILD" // "1" in a child
	envURL        = "HERD_PROCTEST_URL"
	envPrefix     = "HERD_PROCTEST_PREFIX"
	envGroup      = "HERD_PROCTEST_GROUP"
	envMember     = "HERD_PROCTEST_MEMBER"
	envPartitions = "HERD_PROCTEST_PARTITIONS"
	envTTL        = "HERD_PROCTEST_TTL"
	envInterval   = "HERD_PROCTEST_INTERVAL"
	// envInTx names a table (PostgreSQL only): each step of a handler
	// inserts (partition, item) into it and checkpoints item in one
	// pgstore.InTx, instead of calling Claim.Checkpoint.
	envInTx = "HERD_PROCTEST_INTX"
	// envInTxStall names the child whose next InTx after a SIGUSR1 stops
	// in the middle of reading a large result (see stallOnce).
	envInTxStall = "HERD_PROCTEST_INTX_STALL"
	// envTie "1" ties the child's sessions to a connection
	// (herd.Config.TieSession).
	envTie = "HERD_PROCTEST_TIE"
	// envTieGrace, if set (a duration), is the child's
	// herd.Config.TieGrace; children inherit it from the test's
	// environment, to measure takeover with another grace.
	envTieGrace = "HERD_PROCTEST_TIE_GRACE"
)

// event is one line a child writes on its stdout. Seq and Recv are set by
// the parent when it reads the line.
type event struct {
	Ev        string `json:"ev"` // start, stop, cp_ok, cp_rejected, cp_fenced, cp_err
	Member    string `json:"member"`
	Partition string `json:"partition"`
	Epoch     uint64 `json:"epoch"`
	// Value: for start and stop the last checkpoint (0 if none), for cp_*
	// the value the handler tried to write.
	Value uint64 `json:"value"`
	T     int64  `json:"t"` // time.Now().UnixNano() in the child
	// Sent, for cp_* events: when the Checkpoint call began (UnixNano).
	// A call in flight across a SIGSTOP has Sent before it and T after.
	Sent int64  `json:"sent,omitempty"`
	Err  string `json:"err,omitempty"`

	Seq  int       `json:"-"` // receipt order in the parent, over all children
	Recv time.Time `json:"-"` // receipt time in the parent
}

// TestChild is the child process. It does nothing in a normal test run.
func TestChild(t *testing.T) {
	if os.Getenv(envChild) != "1" {
		return
	}
	if err := runChild(); err != nil {
		fmt.Fprintln(os.Stderr, "proctest child:", err)
		os.Exit(3)
	}
}

// emitter writes events as JSON lines, one write per line.
type emitter struct {
	member string
	mu     sync.Mutex
}

func (e *emitter) emit(ev event) {
	ev.Member = e.member
	ev.T = time.Now().UnixNano()
	b, err := json.Marshal(ev)
	if err != nil {
		panic(err)
	}
	b = append(b, '\n')
	e.mu.Lock()
	defer e.mu.Unlock()
	// If the parent is gone the write fails with EPIPE on fd 1 and the Go
	// runtime kills the process with SIGPIPE: no orphan outlives the test.
	_, _ = os.Stdout.Write(b)
}

func runChild() error {
	n, err := strconv.Atoi(os.Getenv(envPartitions))
	if err != nil {
		return fmt.Errorf("%s: %w", envPartitions, err)
	}
	ttl, err := time.ParseDuration(os.Getenv(envTTL))
	if err != nil {
		return fmt.Errorf("%s: %w", envTTL, err)
	}
	interval, err := time.ParseDuration(os.Getenv(envInterval))
	if err != nil {
		return fmt.Errorf("%s: %w", envInterval, err)
	}
	member, group := os.Getenv(envMember), os.Getenv(envGroup)

	// SIGTERM: leave gracefully. SIGKILL is the crash.
	term, stopTerm := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stopTerm()

	octx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	st, err := openStore(octx, os.Getenv(envURL), os.Getenv(envPrefix))
	cancel()
	if err != nil {
		return err
	}
	defer st.Close()

	out := &emitter{member: member}
	write := func(ctx context.Context, c *herd.Claim, v uint64) error { return c.Checkpoint(ctx, encode(v)) }
	if table := os.Getenv(envInTx); table != "" {
		pst, ok := st.(*pgstore.Store)
		if !ok {
			return fmt.Errorf("%s needs a postgres:// store", envInTx)
		}
		write = inTxWrite(pst, group, table, newStall(out, member, ttl))
	}
	var tieGrace time.Duration
	if g := os.Getenv(envTieGrace); g != "" {
		if tieGrace, err = time.ParseDuration(g); err != nil {
			return fmt.Errorf("%s: %w", envTieGrace, err)
		}
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	m, err := herd.Join(context.Background(), st, herd.Config{
		Group:      group,
		Member:     member,
		Partitions: herd.Numbered(n),
		SessionTTL: ttl,
		Handler:    handler(out, ttl, interval, write),
		Logger:     logger,
		TieSession: os.Getenv(envTie) == "1",
		TieGrace:   tieGrace,
	})
	if err != nil {
		return err
	}
	<-term.Done()
	lctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return m.Leave(lctx)
}

// openStore opens the store at url: SQLite for sqlite://, PostgreSQL for
// postgres:// (the schema in the URL), else Redis with the key prefix.
func openStore(ctx context.Context, url, prefix string) (store.Store, error) {
	switch {
	case strings.HasPrefix(url, "sqlite://"):
		return sqlitestore.Open(ctx, url)
	case strings.HasPrefix(url, "postgres://"):
		return pgstore.Open(ctx, url)
	case strings.HasPrefix(url, "etcd://"):
		return etcdstore.Open(ctx, url)
	}
	return redisstore.Open(ctx, url, redisstore.WithPrefix(prefix))
}

func encode(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func decode(b []byte) uint64 {
	if len(b) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}

// freezeDetector notices that the process was stopped (SIGSTOP) and
// resumed: a goroutine that wakes every 10ms records when it sees a gap of
// more than a TTL.
type freezeDetector struct {
	resumed atomic.Int64 // UnixNano of the last resume seen, 0 if none
}

func newFreezeDetector(ttl time.Duration) *freezeDetector {
	d := &freezeDetector{}
	go func() {
		last := time.Now()
		for {
			time.Sleep(10 * time.Millisecond)
			now := time.Now()
			if now.Sub(last) > ttl {
				d.resumed.Store(now.UnixNano())
			}
			last = now
		}
	}()
	return d
}

// handler checkpoints an increasing counter, from LastCheckpoint()+1, every
// interval, through the claim's context, and reports every step.
//
// One exception: after the process was frozen (SIGSTOP) and resumed, the
// handler makes its next write whatever its context says (through a fresh
// context), like a real handler resuming mid-batch, so the test sees what
// the store does with a write from an old owner: it must reject it by the
// epoch. Frozen means more than a TTL since the previous write returned, or
// a resume seen by the detector since the previous write began (a write in
// flight across the stop).
func handler(out *emitter, ttl, interval time.Duration, write func(ctx context.Context, c *herd.Claim, v uint64) error) herd.Handler {
	freeze := newFreezeDetector(ttl)
	return func(c *herd.Claim) error {
		last := decode(c.LastCheckpoint())
		out.emit(event{Ev: "start", Partition: c.Partition, Epoch: c.Epoch, Value: last})
		defer func() { out.emit(event{Ev: "stop", Partition: c.Partition, Epoch: c.Epoch, Value: last}) }()
		tick := time.NewTicker(interval)
		defer tick.Stop()
		began, returned := time.Now(), time.Now() // the previous write
		for {
			select {
			case <-c.Context().Done():
			case <-tick.C:
			}
			frozen := time.Since(returned) > ttl || freeze.resumed.Load() > began.UnixNano()
			base := c.Context()
			switch {
			case frozen:
				base = context.Background()
			case base.Err() != nil:
				return nil
			}
			ctx, cancel := context.WithTimeout(base, time.Second)
			v := last + 1
			began = time.Now()
			err := write(ctx, c, v)
			cancel()
			returned = time.Now()
			sent := began.UnixNano()
			switch {
			case err == nil:
				last = v
				out.emit(event{Ev: "cp_ok", Partition: c.Partition, Epoch: c.Epoch, Value: v, Sent: sent})
			case errors.Is(err, herd.ErrFenced):
				// Refused or cut short by the member itself at its
				// session's fence time.
				out.emit(event{Ev: "cp_fenced", Partition: c.Partition, Epoch: c.Epoch, Value: v, Sent: sent, Err: err.Error()})
			case errors.Is(err, herd.ErrNotOwner):
				out.emit(event{Ev: "cp_rejected", Partition: c.Partition, Epoch: c.Epoch, Value: v, Sent: sent, Err: err.Error()})
			default:
				out.emit(event{Ev: "cp_err", Partition: c.Partition, Epoch: c.Epoch, Value: v, Sent: sent, Err: err.Error()})
			}
		}
	}
}

// inTxWrite returns the write of item v of a claim as one pgstore.InTx:
// insert (partition, v) into table and checkpoint v, fenced by the claim's
// epoch. The checkpoint as of the transaction must be v-1: the handler
// counts from the checkpoint its claim started from.
func inTxWrite(st *pgstore.Store, group, table string, stall *stallOnce) func(ctx context.Context, c *herd.Claim, v uint64) error {
	return func(ctx context.Context, c *herd.Claim, v uint64) error {
		fence := pgstore.Fence{Group: group, Partition: c.Partition, Epoch: c.Epoch}
		return st.InTx(ctx, fence, func(tx pgx.Tx, last []byte) ([]byte, error) {
			if got := decode(last); got != v-1 {
				return nil, fmt.Errorf("item %d of %s after checkpoint %d", v, c.Partition, got)
			}
			if err := stall.maybe(tx, c); err != nil {
				return nil, err
			}
			if _, err := tx.Exec(ctx, "INSERT INTO "+table+" (part, item) VALUES ($1, $2)", c.Partition, int64(v)); err != nil {
				return nil, err
			}
			return encode(v), nil
		})
	}
}

// stallOnce makes one InTx function, the first after the child got
// SIGUSR1, stop in the middle of reading a large result: it reads one row,
// reports "stall", and waits a TTL before reading on. The parent stops
// the process (SIGSTOP) when it sees the report: the server's backend is
// then active, blocked sending, holding the partition's record lock.
type stallOnce struct {
	out   *emitter
	ttl   time.Duration
	armed atomic.Bool
}

// newStall returns nil unless envInTxStall names member.
func newStall(out *emitter, member string, ttl time.Duration) *stallOnce {
	if os.Getenv(envInTxStall) != member {
		return nil
	}
	s := &stallOnce{out: out, ttl: ttl}
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	go func() {
		for range usr1 {
			s.armed.Store(true)
		}
	}()
	return s
}

func (s *stallOnce) maybe(tx pgx.Tx, c *herd.Claim) error {
	if s == nil || !s.armed.CompareAndSwap(true, false) {
		return nil
	}
	// Not the handler's context: its one-second timeout would cut the
	// read short.
	rows, err := tx.Query(context.Background(), "SELECT repeat('x', 1000) FROM generate_series(1, 2000000)")
	if err != nil {
		return err
	}
	defer rows.Close()
	rows.Next()
	s.out.emit(event{Ev: "stall", Partition: c.Partition, Epoch: c.Epoch})
	time.Sleep(s.ttl)
	for rows.Next() {
	}
	return rows.Err()
}
