package pgstore

import (
	"context"
	"testing"
	"time"

	"github.com/herdhq/herd/internal/pgtest"
)

func testURL() string { return pgtest.URL() }

func requireServer(t testing.TB) { t.Helper(); pgtest.Need(t) }

func newSchema(t testing.TB) string { t.Helper(); return pgtest.Schema(t) }

func withOptions(raw string, kv ...string) string { return pgtest.WithOptions(raw, kv...) }

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
	pgtest.Exec(t, sql, args...)
	if t.Failed() {
		t.FailNow()
	}
}
