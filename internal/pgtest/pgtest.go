// Package pgtest gives tests the PostgreSQL server they run against:
// HERD_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432/test?sslmode=disable),
// and a schema of their own, dropped when they end.
package pgtest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DefaultURL is the server tests use unless HERD_POSTGRES_URL says otherwise.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// URL is the test server's URL.
func URL() string {
	if u := os.Getenv("HERD_POSTGRES_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// Redacted is URL without its password, for messages.
func Redacted() string {
	u, err := url.Parse(URL())
	if err != nil {
		return "(unparsable HERD_POSTGRES_URL)"
	}
	return u.Redacted()
}

// Need skips the test when the server is unreachable, unless
// HERD_REQUIRE_SERVERS=1 (then it fails).
func Need(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, URL())
	if err == nil {
		_ = conn.Close(ctx)
		return
	}
	if os.Getenv("HERD_REQUIRE_SERVERS") == "1" {
		t.Fatalf("PostgreSQL at %s is unreachable and HERD_REQUIRE_SERVERS=1: %v", Redacted(), err)
	}
	t.Skipf("PostgreSQL at %s is unreachable (set HERD_POSTGRES_URL): %v", Redacted(), err)
}

// Schema returns a schema name no other test uses, and drops the schema
// (whatever was created in it) when the test ends.
func Schema(t testing.TB) string {
	t.Helper()
	name := "herd_test_" + strings.ToLower(rand.Text()[:12])
	t.Cleanup(func() { Exec(t, fmt.Sprintf(`DROP SCHEMA IF EXISTS %q CASCADE`, name)) })
	return name
}

// WithOptions adds query options to raw.
func WithOptions(raw string, kv ...string) string {
	sep := "?"
	if strings.Contains(raw, "?") {
		sep = "&"
	}
	for i := 0; i+1 < len(kv); i += 2 {
		raw += sep + url.QueryEscape(kv[i]) + "=" + url.QueryEscape(kv[i+1])
		sep = "&"
	}
	return raw
}

// Exec runs one statement on a connection of its own.
func Exec(t testing.TB, sql string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, URL())
	if err != nil {
		t.Errorf("%s: %v", sql, err)
		return
	}
	defer conn.Close(ctx)
	for try := 1; ; try++ {
		_, err := conn.Exec(ctx, sql, args...)
		var pe *pgconn.PgError
		if err != nil && errors.As(err, &pe) && pe.Code == "40P01" && try < 5 {
			// Deadlock detected: a statement such as DROP SCHEMA ... CASCADE
			// that locks many objects can deadlock with a store working in
			// them; the server rolled this one back, so run it again.
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", sql, err)
		}
		return
	}
}

// Count returns the result of a query of one integer.
func Count(t testing.TB, sql string, args ...any) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int64
	if err := conn.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// skipOrFail skips the test with msg, or fails it if HERD_REQUIRE_SERVERS=1.
func skipOrFail(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("HERD_REQUIRE_SERVERS") == "1" {
		t.Fatalf("%s; HERD_REQUIRE_SERVERS=1, so this is a failure", msg)
	}
	t.Skipf("%s; skipping (set HERD_REQUIRE_SERVERS=1 to fail instead)", msg)
}

func rand8() string { return strings.ToLower(rand.Text()[:16]) }
