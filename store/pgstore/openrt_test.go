package pgstore

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/herdhq/herd/store"
)

// flushCounter counts the writes (one per flush of pgx's messages: a round
// trip) on the connections its dial makes.
type flushCounter struct{ writes atomic.Int64 }

func (f *flushCounter) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &countedConn{Conn: c, f: f}, nil
}

type countedConn struct {
	net.Conn
	f *flushCounter
}

func (c *countedConn) Write(b []byte) (int, error) {
	c.f.writes.Add(1)
	return c.Conn.Write(b)
}

var _ pgconn.DialFunc = (&flushCounter{}).dial

// TestOpenRoundTripsInstalled: Open on an installed schema makes one
// round trip after the connection's start-up (the server's version, its
// role, the schema's version and the functions' revision in one
// statement): 16 member processes open their stores at once, and each
// round trip more is one more wait behind the others' (it made four
// before: two statements, each prepared then run).
func TestOpenRoundTripsInstalled(t *testing.T) {
	requireServer(t)
	schema := newSchema(t)
	openIn(t, schema) // installs it
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The connection's start-up alone (TLS, authentication) writes this
	// many times.
	var start flushCounter
	cc, err := pgx.ParseConfig(testURL())
	if err != nil {
		t.Fatal(err)
	}
	cc.DialFunc = start.dial
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	startup := start.writes.Load()
	_ = conn.Close(ctx)
	var fc flushCounter
	s, err := open(ctx, withOptions(testURL(), "schema", schema), fc.dial)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer s.Close()
	if n := fc.writes.Load() - startup; n > 1 {
		t.Fatalf("Open on an installed schema made %d round trips after the connection's start-up; want 1", n)
	}
}

// TestTieConnectionRoundTrips: a tie sets its connection's settings, ties
// and nudges in three round trips (fourteen before: a statement per
// setting, each new statement prepared first), and the settings hold.
func TestTieConnectionRoundTrips(t *testing.T) {
	s := openTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.ensureTies(ctx); err != nil {
		t.Fatal(err)
	}
	const group = "tie-trips"
	id, err := s.OpenSession(ctx, group, "a", 1, tieTTL)
	if err != nil {
		t.Fatal(err)
	}
	var fc flushCounter
	cc := s.pool.Config().ConnConfig.Copy()
	cc.DialFunc = fc.dial
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	q, _ := s.tiesReady()
	before := fc.writes.Load()
	status, err := tieConnection(ctx, conn, q, group, id, store.TieConfig{TTL: tieTTL, Grace: tieGrace})
	if err != nil || status != "ok" {
		t.Fatalf("tieConnection: %q, %v", status, err)
	}
	if n := fc.writes.Load() - before; n > 3 {
		t.Fatalf("tieConnection made %d round trips; want at most 3", n)
	}
	for _, kv := range tieSettings(tieTTL) {
		var v string
		if err := conn.QueryRow(ctx, "SELECT setting FROM pg_settings WHERE name = $1", kv[0]).Scan(&v); errors.Is(err, pgx.ErrNoRows) {
			continue // a setting this server does not know
		} else if err != nil {
			t.Fatal(err)
		}
		if v != kv[1] {
			t.Errorf("%s = %q on the tied connection; want %q", kv[0], v, kv[1])
		}
	}
}
