package pgstore

import (
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Wake-ups of Changes. Every function that appends to a group's log sends
// pg_notify(<schema>_changes, <group>) in the same transaction, so the
// notification goes out when the entries are committed, and only then
// (renewals and checkpoints log nothing and notify nothing). One
// connection per store, outside the pool, LISTENs on the channel and wakes
// the Changes calls waiting on that group; they read the log table again.
//
// The connection is checked when it is made: a notification the store
// sends itself must come back within listenVerify. Behind a pooler in
// transaction mode it never does (LISTEN runs on whichever server
// connection the pooler picked, and that one goes back to the pooler), and
// the store falls back to polling. While the connection is down, waiting
// calls read every poll interval; when it is back (and checked), every
// waiting call reads once at once, from its own last version, so nothing
// notified in between is missed. While it is up, a waiting call still
// reads every backstop interval.
const (
	listenVerify    = 5 * time.Second  // a LISTEN connection's own notification must come back within this
	listenIdle      = 30 * time.Second // a LISTEN connection idle this long is pinged
	listenRetryMax  = 5 * time.Second  // longest pause between attempts to reconnect
	listenRetryFail = time.Minute      // pause after LISTEN was found not to work
	pingPrefix      = "\x01herd-ping " // payloads of the store's own checks (group ids have no control characters)
)

var errListenUnverified = errors.New("LISTEN does not deliver notifications on this connection (a pooler in transaction mode?)")

type hub struct {
	s       *Store
	connCfg *pgx.ConnConfig
	// listenOn is the channel the connection LISTENs on: the store's
	// (tests name another to see LISTEN fail its check).
	listenOn string
	verify   time.Duration // listenVerify (tests shorten it)

	mu      sync.Mutex
	waits   map[string]chan struct{} // closed by the group's next notification
	healthy bool                     // a checked LISTEN connection is up
	pid     uint32                   // its backend's process id
	started bool
	closed  bool
	warned  bool
	cancel  context.CancelFunc
	done    chan struct{}
}

func newHub(s *Store, cfg *pgx.ConnConfig) *hub {
	return &hub{s: s, connCfg: cfg, listenOn: s.channel, verify: listenVerify, waits: map[string]chan struct{}{}}
}

// wait returns a channel closed at the group's next notification (or when
// the LISTEN connection changes state), starting the listener on first use.
func (h *hub) wait(group string) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.s.cfg.listen && !h.started && !h.closed {
		h.started = true
		ctx, cancel := context.WithCancel(context.Background())
		h.cancel, h.done = cancel, make(chan struct{})
		go h.run(ctx)
	}
	ch := h.waits[group]
	if ch == nil {
		ch = make(chan struct{})
		h.waits[group] = ch
	}
	return ch
}

// interval is how long a waiting call waits before it reads again anyway.
func (h *hub) interval() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.healthy {
		return h.s.cfg.backstop
	}
	return h.s.cfg.poll
}

func (h *hub) wake(group string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ch := h.waits[group]; ch != nil {
		close(ch)
		delete(h.waits, group)
	}
}

func (h *hub) wakeAllLocked() {
	for g, ch := range h.waits {
		close(ch)
		delete(h.waits, g)
	}
}

// setState records the LISTEN connection's state and wakes every waiting
// call, which reads the log again from its own version.
func (h *hub) setState(healthy bool, pid uint32) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.healthy, h.pid = healthy, pid
	h.wakeAllLocked()
}

// listenerPID is the backend process id of the LISTEN connection, 0 while
// there is none (for tests).
func (h *hub) listenerPID() uint32 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.healthy {
		return 0
	}
	return h.pid
}

func (h *hub) close() {
	h.mu.Lock()
	h.closed = true
	cancel, done := h.cancel, h.done
	h.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	h.setState(false, 0)
}

// run keeps a LISTEN connection up until ctx ends.
func (h *hub) run(ctx context.Context) {
	defer close(h.done)
	log := slog.Default().With("component", "pgstore", "schema", h.s.schema)
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		verified, err := h.listen(ctx)
		h.setState(false, 0)
		if ctx.Err() != nil {
			return
		}
		pause := backoff
		switch {
		case errors.Is(err, errListenUnverified):
			h.mu.Lock()
			warn := !h.warned
			h.warned = true
			h.mu.Unlock()
			if warn {
				log.Warn("LISTEN/NOTIFY is not working; Changes reads the log every poll interval instead (add ?listen=off to the store URL behind a pooler in transaction mode)",
					"poll_interval", h.s.cfg.poll)
			}
			pause = listenRetryFail
		case verified:
			log.Debug("LISTEN connection lost; polling until it is back", "err", h.s.wrap("listen", err, nil))
			backoff = 100 * time.Millisecond
			pause = backoff
		default:
			log.Debug("LISTEN connection failed; polling until it works", "err", h.s.wrap("listen", err, nil))
			backoff = min(2*backoff, listenRetryMax)
		}
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

// listen makes one LISTEN connection, checks it, and dispatches its
// notifications until it fails. verified says whether it was ever up.
func (h *hub) listen(ctx context.Context) (verified bool, err error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	conn, err := pgx.ConnectConfig(cctx, h.connCfg)
	cancel()
	if err != nil {
		return false, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, `LISTEN "`+h.listenOn+`"`); err != nil {
		return false, err
	}
	token := pingPrefix + rand.Text()
	if _, err := h.s.pool.Exec(ctx, "SELECT pg_notify($1, $2)", h.s.channel, token); err != nil {
		return false, err
	}
	vctx, cancel := context.WithTimeout(ctx, h.verify)
	for {
		n, err := conn.WaitForNotification(vctx)
		if err != nil {
			cancel()
			if ctx.Err() == nil && vctx.Err() != nil {
				return false, errListenUnverified
			}
			return false, err
		}
		if n.Payload == token {
			break
		}
		h.dispatch(n.Payload)
	}
	cancel()
	h.setState(true, conn.PgConn().PID())
	for {
		wctx, cancel := context.WithTimeout(ctx, listenIdle)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			h.dispatch(n.Payload)
		case ctx.Err() != nil:
			return true, ctx.Err()
		case wctx.Err() != nil:
			// Idle: check that the connection is still there.
			pctx, cancel := context.WithTimeout(ctx, listenVerify)
			err := conn.Ping(pctx)
			cancel()
			if err != nil {
				return true, err
			}
		default:
			return true, err
		}
	}
}

func (h *hub) dispatch(payload string) {
	if strings.HasPrefix(payload, pingPrefix) {
		return
	}
	h.wake(payload)
}
