package proctest

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/herdhq/herd/internal/pgtest"
	"github.com/herdhq/herd/store/pgstore"
)

// The PostgreSQL fleet: 4 processes, 64 partitions, a checkpoint every
// 250ms per partition (256 commits a second), the same 2s TTL.
const (
	pgChildren   = 4
	pgPartitions = 64
	pgInterval   = 250 * time.Millisecond
)

// TestProcessesPostgres runs the kill -9, cut and SIGSTOP tests of
// TestProcesses on members sharing a PostgreSQL schema (the postgres://
// store), with the same assertions, and one more: the server terminates
// every connection of one member (pg_terminate_backend), its LISTEN
// connection included, over and over for two TTLs.
func TestProcessesPostgres(t *testing.T) {
	if os.Getenv(envChild) == "1" {
		t.Skip("in a child process")
	}
	if testing.Short() {
		t.Skip("starts 4 OS processes per subtest and takes about 40s; skipped with -short")
	}
	pgtest.Need(t)
	t.Run("kill9", func(t *testing.T) {
		pf := startPGFleet(t, "kill9", nil, nil)
		checkKill9(t, pf.fleet, pf.members)
	})
	t.Run("cut", func(t *testing.T) {
		target := pgAddr(t)
		proxies := map[string]*proxy{}
		pf := startPGFleet(t, "cut", func(m, url string) string {
			p := newProxy(t, target)
			proxies[m] = p
			return withHost(t, url, p.Addr())
		}, nil)
		checkCut(t, pf.fleet, pf.members, proxies)
	})
	t.Run("sigstop", func(t *testing.T) {
		pf := startPGFleet(t, "sigstop", nil, nil)
		checkSigstop(t, pf.fleet, pf.members, pf.st)
	})
	t.Run("sigstop-intx", func(t *testing.T) {
		// Each step of each handler inserts its item into a table of the
		// fleet's schema and checkpoints it in one pgstore.InTx: the
		// same assertions, and the table holds each item exactly once.
		var table string
		pf := startPGFleet(t, "sigstop-intx", nil, func(pf *pgFleet) []string {
			table = pgx.Identifier{pf.schema, "items"}.Sanitize()
			pgtest.Exec(t, "CREATE TABLE "+table+" (part text NOT NULL, item bigint NOT NULL)")
			return []string{envInTx + "=" + table}
		})
		checkSigstop(t, pf.fleet, pf.members, pf.st)
		checkItemsOnce(t, pf, table)
	})
	t.Run("sigstop-in-intx", testPGSigstopInTx)
	t.Run("terminate", testPGTerminate)
}

// pgFleet is a fleet on a schema of its own.
type pgFleet struct {
	*fleet
	members []string
	schema  string
	st      *pgstore.Store // the test's own store on the schema
}

// appName is the application_name of a child's connections: the schema
// makes it unique, so the test never terminates a connection it did not
// make.
func (pf *pgFleet) appName(member string) string { return "herdproc_" + pf.schema + "_" + member }

// url is a child's store URL (or the test's, for member "test").
func (pf *pgFleet) url(member string) string {
	return pgtest.WithOptions(pgtest.URL(), "schema", pf.schema, "application_name", pf.appName(member))
}

// startPGFleet makes a schema (dropped at the end), opens the test's own
// store on it (which creates the tables), starts the children (child name
// -> store URL through via, if not nil) and waits until they share the
// partitions evenly.
func startPGFleet(t *testing.T, name string, via func(member, url string) string, env func(pf *pgFleet) []string) *pgFleet {
	t.Helper()
	pf := &pgFleet{schema: pgtest.Schema(t)} // dropped after the children and the store are gone
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := pgstore.Open(ctx, pf.url("test"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	pf.st = st
	pf.fleet = newFleet(t, "proctest-pg-"+name, "", pgPartitions, ttl)
	pf.interval = pgInterval
	if env != nil {
		pf.env = env(pf)
	}
	for i := range pgChildren {
		pf.members = append(pf.members, fmt.Sprintf("c%d", i))
	}
	for _, m := range pf.members {
		url := pf.url(m)
		if via != nil {
			url = via(m, url)
		}
		pf.start(m, url)
	}
	d := pf.waitBalanced("the fleet to spread the partitions", pf.members, 0, 30*time.Second)
	t.Logf("%d processes share %d partitions evenly %v after starting (schema %s)", pgChildren, pgPartitions, d.Round(time.Millisecond), pf.schema)
	return pf
}

// pgAddr is the host:port of the test server, for the proxy.
func pgAddr(t *testing.T) string {
	t.Helper()
	cfg, err := pgconn.ParseConfig(pgtest.URL())
	if err != nil {
		// pgx's message may quote the URL, password and all.
		t.Fatalf("HERD_POSTGRES_URL %s: pgx cannot parse it", pgtest.Redacted())
	}
	if strings.HasPrefix(cfg.Host, "/") || len(cfg.Fallbacks) > 0 {
		t.Skipf("the cut test needs one TCP server; %s is not", pgtest.Redacted())
	}
	return net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
}

// backend is one server process of a child's, from pg_stat_activity.
type backend struct {
	pid    int32
	listen bool // its last statement was LISTEN: the store's LISTEN connection
}

// admin is the test's own connection for pg_stat_activity and
// pg_terminate_backend.
type admin struct {
	t    *testing.T
	conn *pgx.Conn
}

func newAdmin(t *testing.T) *admin {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pgtest.URL())
	if err != nil {
		t.Fatalf("connecting to %s: %v", pgtest.Redacted(), err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return &admin{t: t, conn: conn}
}

// backends lists the connections whose application_name is app.
func (a *admin) backends(app string) []backend {
	a.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rows, err := a.conn.Query(ctx, `SELECT pid, coalesce(query, '') LIKE 'LISTEN %' FROM pg_stat_activity WHERE application_name = $1`, app)
	if err != nil {
		a.t.Fatalf("reading pg_stat_activity: %v", err)
	}
	bs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (backend, error) {
		var b backend
		return b, r.Scan(&b.pid, &b.listen)
	})
	if err != nil {
		a.t.Fatalf("reading pg_stat_activity: %v", err)
	}
	return bs
}

// terminate ends every connection whose application_name is app and
// returns those it ended.
func (a *admin) terminate(app string) []backend {
	a.t.Helper()
	if !strings.HasPrefix(app, "herdproc_herd_test_") {
		a.t.Fatalf("refusing to terminate connections named %q: not a name this test gives", app)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The connections are chosen first, in a materialized CTE, and
	// pg_terminate_backend is called in the select list on those rows
	// only: in a WHERE clause the planner may order the conditions as it
	// likes and call it on every backend of the server.
	rows, err := a.conn.Query(ctx, `WITH b AS MATERIALIZED (
  SELECT pid, application_name AS app, coalesce(query, '') LIKE 'LISTEN %' AS listen
  FROM pg_stat_activity WHERE application_name = $1 AND pid <> pg_backend_pid()
)
SELECT pid, listen, CASE WHEN app = $1 THEN pg_terminate_backend(pid) ELSE false END FROM b`, app)
	if err != nil {
		a.t.Fatalf("pg_terminate_backend: %v", err)
	}
	var bs []backend
	for rows.Next() {
		var b backend
		var ended bool
		if err := rows.Scan(&b.pid, &b.listen, &ended); err != nil {
			a.t.Fatalf("pg_terminate_backend: %v", err)
		}
		if ended {
			bs = append(bs, b)
		}
	}
	if err := rows.Err(); err != nil {
		a.t.Fatalf("pg_terminate_backend: %v", err)
	}
	return bs
}

// waitListening waits until a connection named app, not one of gone (a
// terminated backend may still be listed for a moment), is a LISTEN
// connection, and returns its pid.
func (a *admin) waitListening(app string, timeout time.Duration, gone map[int32]bool) int32 {
	a.t.Helper()
	begin := time.Now()
	for {
		for _, b := range a.backends(app) {
			if b.listen && !gone[b.pid] {
				return b.pid
			}
		}
		if time.Since(begin) > timeout {
			a.t.Fatalf("no LISTEN connection named %s within %v: %v", app, timeout, a.backends(app))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The terminate test: how often and for how long the server ends the
// victim's connections, and how long the fleet has to be balanced again
// after the last time.
const (
	terminateEvery   = 250 * time.Millisecond
	terminateFor     = 2 * ttl
	terminateRecover = 10 * time.Second
	// A change must reach the member well within the 10 s backstop read of
	// a Changes call waiting on a LISTEN connection that works.
	joinSeen = 5 * time.Second
)
