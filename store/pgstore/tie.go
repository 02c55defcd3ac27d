package pgstore

// Session ties (store.ConnTied): a session-level advisory lock held by a
// connection dedicated to the session, which watches the next tie of the
// group around a ring. See docs/takeover.md for the design and its safety
// argument.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/herdhq/herd/store"
)

var _ store.ConnTied = (*Store)(nil)

// tieAppPrefix, followed by the session id, is the application_name of a
// session's tied connection (an operator finds it in pg_stat_activity).
const tieAppPrefix = "herd tie "

// watchWait bounds one watch statement, which waits for the next tie's
// lock while the ring stays as it is: joins cancel the wait (nudge), and a
// leave or a death frees the lock it waits for, so the bound only sets the
// cost of a steady ring, one statement per tied member per 60 s (0.017/s,
// within the 0.02 other store operations per member per second a fleet's
// steady budget allows beside renewals), and how late a member learns
// that its own tie was cut by someone else ('gone'; its TTL fence acts
// first). The server holds no snapshot over it (watch commits every round).
const watchWait = 60 * time.Second

// watchBeat is the longest the server stays silent on a tied connection
// whose backend lives: during a watch it sends a DEBUG message after each
// round of its wait (at most watchBeat, and below deadlock_timeout). The
// member's silence deadline (watchDeadline) counts from the last one; on a
// server without client_connection_check_interval (PostgreSQL 13) a
// killed member's backend fails to write one and exits.
const watchBeat = 2 * time.Second

// connCheckInterval is client_connection_check_interval on the tied
// connection (PostgreSQL 14+): how soon a backend inside watch notices
// that its client died, and frees its lock.
const connCheckInterval = 100 * time.Millisecond

// tieQueries are the statements of ties, with the store's schema.
type tieQueries struct{ tie, nudge, watch, cutGroup string }

// tieState is what a Store keeps of ties.
type tieState struct {
	mu    sync.Mutex
	ready bool // ensureTies succeeded: q is set, ExpireSessions cuts ties
	q     tieQueries
}

// tiesReady reports whether this store installed the ties' SQL, and
// their queries.
func (s *Store) tiesReady() (tieQueries, bool) {
	s.ties.mu.Lock()
	defer s.ties.mu.Unlock()
	return s.ties.q, s.ties.ready
}

// cutTies is ExpireSessions' backstop: it cuts the group's ties whose
// lock is free, and caps again the expiry of those cut. A failure is
// left to the next call: the sessions still end by TTL.
func (s *Store) cutTies(ctx context.Context, group string) {
	q, ok := s.tiesReady()
	if !ok {
		return
	}
	_, _ = s.pool.Exec(ctx, q.cutGroup, group)
}

// dropDeletedTies deletes the ties of deleted groups (DeleteGroup's
// follow-up: the table exists only once a store tied a session, so the
// group's own statement cannot name it). A failure leaves rows that no
// statement reads again.
func (s *Store) dropDeletedTies(ctx context.Context) {
	S := s.qschema
	_, _ = s.pool.Exec(ctx, "DO $$ BEGIN IF to_regclass("+quoteLiteral(S+".ties")+") IS NOT NULL THEN "+
		"DELETE FROM "+S+".ties x WHERE NOT EXISTS (SELECT 1 FROM "+S+".groups g WHERE g.gid = x.gid); END IF; END $$")
}

// tieSettings are the tied connection's own settings: no server-side
// timeout may end it while its member lives, and none by a network
// failure before the member has fenced itself (docs/takeover.md: a cut
// at t0 cannot end it before t0 + 3 TTL). Settings the server does not
// know (an older version) are skipped.
func tieSettings(ttl time.Duration) [][2]string {
	sec := strconv.FormatInt(int64(math.Ceil(ttl.Seconds())), 10)
	return [][2]string{
		{"idle_session_timeout", "0"},
		{"idle_in_transaction_session_timeout", "0"},
		{"statement_timeout", "0"},
		{"tcp_keepalives_idle", sec},
		{"tcp_keepalives_interval", sec},
		{"tcp_keepalives_count", "3"},
		{"tcp_user_timeout", strconv.FormatInt(4*ttl.Milliseconds(), 10)},
		{"client_connection_check_interval", strconv.FormatInt(connCheckInterval.Milliseconds(), 10)},
		// watch's heartbeats are DEBUG messages: sent to this client, and
		// not logged by a server at the default log_min_messages.
		{"client_min_messages", "debug1"},
	}
}

// TieSession implements store.ConnTied: it opens a connection outside the
// pool, sets its timeouts (tieSettings), takes the session's advisory
// lock on it and records the tie, then watches the ring on it until
// Close. A read-only store, and a lock key already taken, give
// errors.ErrUnsupported.
func (s *Store) TieSession(ctx context.Context, group, session string, cfg store.TieConfig) (store.Tie, error) {
	if err := s.begin(ctx, "TieSession", store.ValidateCloseSession(group, session)); err != nil {
		return nil, err
	}
	if cfg.TTL <= 0 || cfg.Grace <= 0 || cfg.Grace >= cfg.TTL {
		return nil, fmt.Errorf("pgstore: TieSession: grace %v must be above 0 and below the TTL %v: %w", cfg.Grace, cfg.TTL, store.ErrInvalid)
	}
	if s.cfg.readOnly {
		return nil, fmt.Errorf("pgstore: TieSession: the store is read-only: %w", errors.ErrUnsupported)
	}
	if err := s.ensureTies(ctx); err != nil {
		return nil, err
	}
	q, _ := s.tiesReady()
	cc := s.pool.Config().ConnConfig.Copy()
	cc.RuntimeParams["application_name"] = tieAppPrefix + session
	signs := newSigns()
	cc.OnNotice = func(*pgconn.PgConn, *pgconn.Notice) { signs.beat() }
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return nil, s.connectErr(err)
	}
	status, err := tieConnection(ctx, conn, q, group, session, cfg)
	if err == nil && status != "ok" {
		err = tieRefused(session, status)
	} else if err != nil {
		err = s.fail("TieSession", err)
	}
	if err != nil {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = conn.Close(cctx)
		cancel()
		return nil, err
	}
	wctx, cancel := context.WithCancel(context.Background())
	t := &tie{s: s, q: q, group: group, session: session, cfg: cfg, conn: conn, cancel: cancel,
		done: make(chan struct{}), TieLoss: store.NewTieLoss(), signs: signs}
	go t.watch(wctx)
	return t, nil
}

// tieConnection sets the connection's settings and ties the session to it,
// in three round trips (settings, tie, nudge): it made fourteen, a
// statement per setting, each new statement prepared first, while 16
// members starting together read their groups beside it.
func tieConnection(ctx context.Context, conn *pgx.Conn, q tieQueries, group, session string, cfg store.TieConfig) (string, error) {
	var once []any // each statement in one round trip, unless the URL asks for the simple protocol
	if conn.Config().DefaultQueryExecMode != pgx.QueryExecModeSimpleProtocol {
		once = []any{pgx.QueryExecModeExec}
	}
	settings := tieSettings(cfg.TTL)
	names, values := make([]string, len(settings)), make([]string, len(settings))
	for i, kv := range settings {
		names[i], values[i] = kv[0], kv[1]
	}
	if _, err := conn.Exec(ctx, "SELECT set_config(t.name, t.value, false) FROM unnest($1::text[], $2::text[]) AS t(name, value) "+
		"WHERE EXISTS (SELECT 1 FROM pg_settings p WHERE p.name = t.name)", append(once, names, values)...); err != nil {
		return "", err
	}
	var status string
	err := conn.QueryRow(ctx, q.tie, append(once, group, session, ttlMicros(cfg.Grace))...).Scan(&status)
	if pgCode(err) == "57014" {
		// Cancelled by another tie made at the same moment, taken for a
		// watch: once more (the lock, if taken, is taken again: advisory
		// locks count).
		err = conn.QueryRow(ctx, q.tie, append(once, group, session, ttlMicros(cfg.Grace))...).Scan(&status)
	}
	if err == nil && status == "ok" {
		// Best effort: without it the ring finds the new tie within a
		// watch's wait.
		_, _ = conn.Exec(ctx, q.nudge, append(once, group, session)...)
	}
	return status, err
}

func tieRefused(session, status string) error {
	switch status {
	case "expired":
		return fmt.Errorf("pgstore: TieSession of session %q: %w", session, store.ErrSessionExpired)
	case "taken":
		return fmt.Errorf("pgstore: TieSession of session %q: its lock key is held by another connection (a collision of keys): the session keeps its TTL alone: %w",
			session, errors.ErrUnsupported)
	}
	return unexpected("TieSession", status)
}

// tie is one session's tie: its connection and the goroutine that watches
// on it.
type tie struct {
	s              *Store
	q              tieQueries
	group, session string
	cfg            store.TieConfig
	conn           *pgx.Conn // used by watch alone, then by Close
	cancel         context.CancelFunc
	done           chan struct{}  // closed when watch returned
	ending         sync.WaitGroup // endCut calls under way
	*store.TieLoss                // Lost, Err
	closeOnce      sync.Once
	// watches counts watch statements that returned, failed those the
	// server answered with an error other than a cancel.
	watches, failed atomic.Int64
	*signs          // what the member heard on the connection, and when
}

// Close stops the watch (cancelling its statement ends the connection,
// pgx's way) and closes the connection, which frees the lock.
func (t *tie) Close() error {
	t.closeOnce.Do(func() {
		t.cancel()
		<-t.done
		t.ending.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = t.conn.Close(ctx)
	})
	return nil
}

// watch runs the watch statement until Close, or until the connection
// ends (lost). An error the server answered with leaves the connection and
// its lock in place: the statement is tried again after a pause.
func (t *tie) watch(ctx context.Context) {
	defer close(t.done)
	for {
		status, next, err := t.watchOnce(ctx)
		switch {
		case ctx.Err() != nil || t.Err() != nil: // closed, or lost by watchOnce's deadline
			return
		case err != nil && t.conn.IsClosed():
			t.Lose(t.s.wrap("pgstore: the tied connection of session "+strconv.Quote(t.session)+" ended", err, store.ErrUnavailable))
			return
		case pgCode(err) == "57014":
			// Cancelled by a new tie of the group (tie): watch again
			// at once, its new successor.
		case pgCode(err) == "40P01":
			// A deadlock: watch catches those of its waits (the ring's
			// waits form a cycle) and keeps them below
			// deadlock_timeout; counted, and watched again at once.
			t.failed.Add(1)
		case err != nil:
			t.failed.Add(1)
			pause := time.NewTimer(watchBeat / 4)
			select {
			case <-ctx.Done():
				pause.Stop()
				return
			case <-pause.C:
			}
		case status == "gone":
			t.Lose(fmt.Errorf("pgstore: the tie of session %q is gone (the session ended): %w", t.session, store.ErrSessionExpired))
			return
		case status == "cut" && next != nil && *next > 0:
			// In a goroutine of its own: the connection must be read all
			// the time, or its end would go unnoticed for the grace.
			d := micros(*next)
			t.ending.Go(func() { t.endCut(ctx, d) })
		}
	}
}

// watchOnce runs the watch statement once. A silence of the connection
// (no answer, no heartbeat) longer than watchDeadline loses the tie at
// once, before the statement is cancelled: the connection may be cut where
// the member cannot see it, and the server may free its lock once
// something drops its side (see docs/takeover.md).
func (t *tie) watchOnce(ctx context.Context) (status string, next *int64, err error) {
	qctx, cancel := context.WithCancel(ctx)
	defer cancel()
	t.heard() // the statement's start counts as heard: the silence runs from here
	answered := make(chan struct{})
	var judge sync.WaitGroup
	judge.Go(func() { t.judgeSilence(answered, cancel) })
	err = t.conn.QueryRow(qctx, t.q.watch, t.group, t.session,
		int32(watchWait/time.Millisecond), int32(watchBeat/time.Millisecond)).Scan(&status, &next)
	close(answered)
	judge.Wait()
	t.watches.Add(1)
	return status, next, err
}

// judgeSilence loses the tie, and cancels the watch, once nothing was
// heard on the connection for watchDeadline, until answered is closed.
// The silence is judged twice, stallRecheck apart: after a stall of the
// member's own process (SIGSTOP, a long pause) the heartbeats and the
// answer that came meanwhile are read first, and the tie is kept.
func (t *tie) judgeSilence(answered <-chan struct{}, cancel context.CancelFunc) {
	deadline := watchDeadline(t.cfg.TTL)
	timer := time.NewTimer(deadline - stallRecheck)
	defer timer.Stop()
	suspect := false
	for {
		select {
		case <-answered:
			return
		case <-timer.C:
		}
		quiet := t.quiet()
		switch {
		case quiet < deadline-stallRecheck:
			suspect = false
			timer.Reset(deadline - stallRecheck - quiet)
		case !suspect:
			suspect = true
			timer.Reset(stallRecheck)
		default:
			t.Lose(fmt.Errorf("pgstore: the tied connection of session %q was silent for %v (a network cut?): %w",
				t.session, quiet.Round(time.Millisecond), store.ErrUnavailable))
			cancel()
			return
		}
	}
}

// watchDeadline is how long the member hears nothing on its tied
// connection (on which the server sends something at least every
// watchBeat) before it takes the connection for cut: watchBeat plus a
// quarter of the TTL.
func watchDeadline(ttl time.Duration) time.Duration { return watchBeat + ttl/4 }

// stallRecheck is the last part of watchDeadline: the time a member that
// was stalled has to read an answer that came during its stall.
const stallRecheck = 250 * time.Millisecond

// endCut ends the sessions this tie saw cut, once their grace d has
// passed: ExpireSessions caps them again (a renewal may have moved their
// expiry on) and expires them, logged, so the members follow at once and
// none needs to learn the new expiry first.
func (t *tie) endCut(ctx context.Context, d time.Duration) {
	for d > 0 {
		wait := time.NewTimer(d)
		select {
		case <-ctx.Done():
			wait.Stop()
			return
		case <-wait.C:
		}
		// A failure leaves the sessions to the members' own expiry
		// calls, as without ties.
		var err error
		if d, err = t.s.ExpireSessions(ctx, t.group); err != nil || d > t.cfg.Grace {
			break
		}
	}
}
