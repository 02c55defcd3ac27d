package pgstore

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

const defaultTestURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// testURL is the server the tests use: HERD_POSTGRES_URL, or the local
// default.
func testURL() string {
	if u := os.Getenv("HERD_POSTGRES_URL"); u != "" {
		return u
	}
	return defaultTestURL
}

// requireServer skips the test when the server is unreachable, unless
// HERD_REQUIRE_SERVERS=1 (then it fails).
func requireServer(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, testURL())
	if err == nil {
		_ = conn.Close(ctx)
		return
	}
	if os.Getenv("HERD_REQUIRE_SERVERS") == "1" {
		t.Fatalf("PostgreSQL at %s is unreachable and HERD_REQUIRE_SERVERS=1: %v", redactedTestURL(), err)
	}
	t.Skipf("PostgreSQL at %s is unreachable (set HERD_POSTGRES_URL): %v", redactedTestURL(), err)
}

func redactedTestURL() string {
	u, err := url.Parse(testURL())
	if err != nil {
		return "(unparsable HERD_POSTGRES_URL)"
	}
	return u.Redacted()
}

// newSchema returns a schema name no other test uses, and drops the schema
// when the test ends.
func newSchema(t testing.TB) string {
	t.Helper()
	name := "herd_test_" + strings.ToLower(rand.Text()[:12])
	t.Cleanup(func() { dropSchema(t, name) })
	return name
}

func dropSchema(t testing.TB, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, testURL())
	if err != nil {
		t.Errorf("dropping schema %s: %v", name, err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, fmt.Sprintf(`DROP SCHEMA IF EXISTS %q CASCADE`, name)); err != nil {
		t.Errorf("dropping schema %s: %v", name, err)
	}
}

// withOptions adds query options to the test URL.
func withOptions(raw string, kv ...string) string {
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

// openTest opens a store on a schema of its own, closed when the test ends.
func openTest(t testing.TB, opts ...Option) *Store {
	t.Helper()
	requireServer(t)
	return openIn(t, newSchema(t), opts...)
}

// openIn opens a store on the given schema, closed when the test ends.
func openIn(t testing.TB, schema string, opts ...Option) *Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Open(ctx, withOptions(testURL(), "schema", schema, "pool_max_conns", "8"), opts...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// admin runs one SQL statement on its own connection.
func admin(t testing.TB, sql string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, testURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}
