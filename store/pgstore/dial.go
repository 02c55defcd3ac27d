package pgstore

import (
	"context"
	"errors"
	"net"

	"github.com/jackc/pgx/v5/pgconn"
)

// resetOnTimeout wraps dial, the pool's: a TCP connection it makes is
// reset (SO_LINGER 0, then closed) as soon as a read or a write on it
// fails on its deadline, so the kernel drops what the server has not
// acknowledged instead of sending it on.
//
// When a call's context ends, pgx sets its connection's deadline, and the
// read or write under way fails on it. pgx then closes the connection,
// but only after sending a cancel request on a new connection, a
// Terminate message, and reading what comes until a deadline 15 s later.
// When the network is cut, the call's request is still in the kernel's
// send queue all that time, and the kernel sends it again on its back-off:
// the server runs it when the network comes back, seconds after the
// caller was told that the call failed (an OpenSession given up on opens a
// session that nobody renews; docs/partitions.md). Reset at once, a call
// given up on reaches the server before it fails or never (a reply lost
// is OpenSession's to handle: store.Ghosts). pgx sets no other deadline
// on the pool's connections while they serve calls, so a read or write
// failing on one is a call given up on. The LISTEN connection keeps pgx's
// dial: it waits for notifications with a deadline and goes on after it.
func resetOnTimeout(dial pgconn.DialFunc) pgconn.DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		tc, ok := c.(*net.TCPConn)
		if !ok {
			return c, nil // a unix socket: no network to cross
		}
		return &resetConn{TCPConn: tc}, nil
	}
}

// resetConn is a TCP connection reset when a read or a write on it fails
// on its deadline.
type resetConn struct{ *net.TCPConn }

func (c *resetConn) Read(b []byte) (int, error) {
	n, err := c.TCPConn.Read(b)
	c.resetOn(err)
	return n, err
}

func (c *resetConn) Write(b []byte) (int, error) {
	n, err := c.TCPConn.Write(b)
	c.resetOn(err)
	return n, err
}

func (c *resetConn) resetOn(err error) {
	var ne net.Error
	if err != nil && errors.As(err, &ne) && ne.Timeout() {
		_ = c.SetLinger(0)
		_ = c.Close()
	}
}
