package pgstore

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/herdhq/herd/internal/valve"
	"github.com/herdhq/herd/store/storetest"
)

// openThrough opens a store on a schema of its own whose connections go to
// host (host:port) instead of the test server; closed when the test ends.
func openThrough(t *testing.T, host string, opts ...Option) *Store {
	t.Helper()
	u, err := url.Parse(testURL())
	if err != nil {
		t.Fatal(err)
	}
	u.Host = host
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	s, err := Open(ctx, withOptions(u.String(), "schema", newSchema(t)), opts...)
	if err != nil {
		t.Fatalf("Open through %s: %v", host, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// A session opened by a call whose reply was lost (the server ran it) is
// closed by the next OpenSession of the group (storetest.RunLostOpenReply).
func TestOpenSessionClosesASessionWhoseReplyWasLost(t *testing.T) {
	requireServer(t)
	u, err := url.Parse(testURL())
	if err != nil {
		t.Fatal(err)
	}
	proxy := valve.New(t, u.Host)
	storetest.RunLostOpenReply(t, openThrough(t, proxy.Addr), proxy.Set)
}
