package pgstore

// The LISTEN connection: its health, and the loop that keeps one open and verified.

import (
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
)

// setState records the LISTEN connection's state and wakes every waiting
// call, which reads the log again from its own version.
func (h *hub) setState(healthy bool, pid uint32) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.healthy, h.pid = healthy, pid
	h.wakeAllLocked()
}

// suspect stops trusting the checked LISTEN connection, if there is one:
// waiting calls read again at once and then every poll interval, and the
// connection is replaced.
func (h *hub) suspect() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.healthy || h.interrupt == nil {
		return
	}
	h.healthy, h.suspected = false, true
	h.wakeAllLocked()
	h.interrupt()
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
			// Only the check's own deadline means LISTEN does not work;
			// read before cancel, which would set vctx.Err() whatever the
			// cause (a connection lost during the check is just lost).
			unverified := ctx.Err() == nil && errors.Is(vctx.Err(), context.DeadlineExceeded)
			cancel()
			if unverified {
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
		h.mu.Lock()
		h.interrupt = cancel
		h.mu.Unlock()
		n, err := conn.WaitForNotification(wctx)
		cancel()
		h.mu.Lock()
		suspected := h.suspected
		h.interrupt, h.suspected = nil, false
		h.mu.Unlock()
		switch {
		case suspected:
			return true, errListenSuspect
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
