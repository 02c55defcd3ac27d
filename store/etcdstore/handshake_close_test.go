package etcdstore

import (
	"context"
	"net"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/herdhq/herd/internal/blackhole"
	"github.com/herdhq/herd/internal/etcdtest"
)

// TestCloseEndsHandshakeWatchers: the watcher of a connection's handshake
// is the store's: once Close returns, none is left running, though the
// connection it watched had not read anything yet.
func TestCloseEndsHandshakeWatchers(t *testing.T) {
	u := etcdtest.Need(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	silent := blackhole.Serve(t, ln) // accepts, never answers
	var toSilent atomic.Bool
	dial := func(ctx context.Context, addr string) (net.Conn, error) {
		if toSilent.Load() {
			addr = silent
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s, err := open(ctx, u, dial)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	closed := false
	defer func() {
		if !closed {
			_ = s.Close()
		}
	}()
	// Drop the client's connections: gRPC dials again, to a server whose
	// handshake never answers, and a watcher waits on it (up to silentMax).
	toSilent.Store(true)
	s.conns.mu.Lock()
	var open []*conn
	for _, c := range s.conns.open {
		open = append(open, c)
	}
	s.conns.mu.Unlock()
	for _, c := range open {
		c.reset()
	}
	waitFor(t, 10*time.Second, "a watcher of a handshake with no answer", func() bool { return handshakeWatchers() > 0 })
	closed = true
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if n := handshakeWatchers(); n > 0 {
		t.Errorf("%d handshake watchers still running after Close; want none", n)
	}
}

// handshakeWatchers counts the goroutines running watchHandshake.
func handshakeWatchers() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), ".(*conns).watchHandshake(")
		}
		buf = make([]byte, 2*len(buf))
	}
}
