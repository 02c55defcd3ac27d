package redisstore

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/herdhq/herd/internal/redistest"
	"github.com/herdhq/herd/internal/valve"
)

// A call whose context allows longer than go-redis' default read timeout
// (5 s) waits for its answer that long: a Redis busy serving a fleet
// answers a member's read of its group (given the session TTL) after the
// 5 s. Before, go-redis gave up on the reply at 5 s, sent the read again,
// gave up again, and the call failed after 10 s with an i/o timeout
// however long its context allowed; a busy Redis ran each large read
// twice, and members read again from the start, until sessions expired.
func TestCallWaitsForItsDeadlineNotGoRedisDefault(t *testing.T) {
	raw := redistest.Need(t)
	prefix := testPrefix(t, raw)
	u, err := url.Parse(redistest.URL())
	if err != nil {
		t.Fatal(err)
	}
	proxy := valve.New(t, u.Host)
	u.Host = proxy.Addr
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := Open(ctx, u.String(), WithPrefix(prefix))
	if err != nil {
		t.Fatalf("Open through the proxy: %v", err)
	}
	defer s.Close()

	const busy = 11 * time.Second // longer than two of go-redis' default read timeouts
	proxy.Set(true)
	read := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*busy)
		defer cancel()
		_, err := s.Snapshot(ctx, "g")
		read <- err
	}()
	select {
	case err := <-read:
		t.Fatalf("Snapshot returned while the server was mute: %v", err)
	case <-time.After(busy): // the server's answer is held this long
	}
	proxy.Set(false)
	if err := <-read; err != nil {
		t.Fatalf("Snapshot with a %v deadline, answered after %v: %v", 3*busy, busy, err)
	}
}
