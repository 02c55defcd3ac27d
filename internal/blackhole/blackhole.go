// Package blackhole is a TCP server for tests that accepts connections and
// never answers: what a store looks like when its host accepts a
// connection but the server behind it is stopped or wedged.
package blackhole

import (
	"net"
	"sync"
	"testing"
)

// Listen starts a server on a free loopback port that accepts every
// connection, reads nothing and writes nothing, and returns its address
// (host:port). The listener and the connections are closed when the test
// ends.
func Listen(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("blackhole: listen: %v", err)
	}
	return Serve(t, ln)
}

// Serve is Listen on a listener of the caller's (one in a network
// namespace, say): it accepts on ln until the test ends, then closes ln and
// the connections, and returns ln's address.
func Serve(t testing.TB, ln net.Listener) string {
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}
