package redisstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/herdhq/herd/internal/redistest"
	"github.com/herdhq/herd/store"
)

// Test helpers. The tests find Redis through HERD_REDIS_URL (default
// redis://127.0.0.1:6379/0); see package redistest. Every test uses its own
// random key prefix and deletes its keys when it ends, so runs can share a
// server.

// testPrefix returns a key prefix no other test or run uses, and deletes
// every key under it when t ends.
func testPrefix(t testing.TB, raw *redis.Client) string {
	t.Helper()
	return redistest.Prefix(t, raw, "herdtest")
}

// newTestStore opens a Store on the test server with a fresh prefix.
func newTestStore(t testing.TB) (*Store, *redis.Client) {
	t.Helper()
	raw := redistest.Need(t)
	s := openWithPrefix(t, testPrefix(t, raw))
	return s, raw
}

func openWithPrefix(t testing.TB, prefix string, opts ...Option) *Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := Open(ctx, redistest.URL(), append([]Option{WithPrefix(prefix)}, opts...)...)
	if err != nil {
		t.Fatalf("Open(%s): %v", redistest.URL(), err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// serverMicros is the server's clock in µs.
func serverMicros(t testing.TB, c *redis.Client) uint64 {
	t.Helper()
	tm, err := c.Time(context.Background()).Result()
	if err != nil {
		t.Fatalf("TIME: %v", err)
	}
	return uint64(tm.UnixMicro())
}

func wantIs(t testing.TB, err, target error, what string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v; want %v", what, err, target)
	}
}

func must(t testing.TB, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// checkStore asserts s implements store.Store (at compile time as well).
var _ store.Store = (*Store)(nil)

// keepErr is KeepAlive's error, for tests that check only that.
func keepErr(_ time.Duration, err error) error { return err }

// setErr is SetPartitions' error alone.
func setErr(_ store.SetResult, err error) error { return err }
