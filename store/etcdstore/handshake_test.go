//go:build linux

package etcdstore

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/herdhq/herd/internal/blackhole"
	"github.com/herdhq/herd/internal/loopns"
)

// TestLostHandshakeDropped: a connection whose first bytes get no answer
// (the path loses them, or the server never answers) is dropped before
// gRPC's handshake deadline, so that gRPC dials again instead of waiting
// for the kernel's next retransmission (3 s on a connection whose SYN was
// sent again). Before, it was kept until the server answered: after a
// heal, a member's calls found no connection ready for 3 s.
func TestLostHandshakeDropped(t *testing.T) {
	for _, tc := range []struct {
		name string
		lose bool // the path loses what is sent after the connect
	}{
		{"path loses the preface", true},
		{"server never answers", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := loopns.New(t)
			addr := silentServer(t, ns)
			cs := &conns{netDial: func(ctx context.Context, addr string) (net.Conn, error) { return ns.Dial(ctx, "tcp", addr) }}
			defer cs.stop()
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			c, err := cs.dial(ctx, addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if tc.lose {
				ns.Loopback(t, false)
				defer ns.Loopback(t, true)
			}
			if _, err := c.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 10*time.Second, "the store dropping the connection whose handshake got no answer", func() bool {
				cs.mu.Lock()
				defer cs.mu.Unlock()
				return cs.open[c.LocalAddr().String()] == nil
			})
		})
	}
}

// silentServer listens on ns's loopback, accepts connections and never
// writes to them; it returns the address to dial from ns.
func silentServer(t *testing.T, ns *loopns.NS) string {
	t.Helper()
	var ln net.Listener
	if err := ns.Do(func() error {
		var err error
		ln, err = net.Listen("tcp", "127.0.0.1:0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return blackhole.Serve(t, ln)
}
