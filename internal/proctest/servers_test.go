package proctest

import (
	"net/url"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/herdhq/herd/internal/redistest"
)

// The test finds Redis through HERD_REDIS_URL (default
// redis://127.0.0.1:6379/0); see package redistest. Every subtest uses its
// own random key prefix and deletes its keys when it ends.

func testPrefix(t testing.TB, raw *redis.Client) string {
	t.Helper()
	return redistest.Prefix(t, raw, "herdproctest")
}

// withHost returns rawURL (a redis:// or postgres:// URL) pointing at addr
// instead, with the same credentials, database and options.
func withHost(t testing.TB, rawURL, addr string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatalf("parsing %q: %v", rawURL, err)
	}
	u.Host = addr
	return u.String()
}

// redisAddr is the host:port of a redis:// URL.
func redisAddr(t testing.TB, rawURL string) string {
	t.Helper()
	opt, err := redis.ParseURL(rawURL)
	if err != nil {
		t.Fatalf("parsing %q: %v", rawURL, err)
	}
	return opt.Addr
}
