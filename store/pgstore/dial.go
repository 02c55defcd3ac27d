package pgstore

import (
	"context"
	"errors"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/herdhq/herd/internal/stagger"
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

// DefaultDialStagger is how long a dial waits for its TCP connection
// before it starts another attempt beside it (see WithDialStagger).
const DefaultDialStagger = 200 * time.Millisecond

// maxDialAttempts bounds the attempts of one dial under way: 32 cover
// DefaultConnectTimeout at DefaultDialStagger.
const maxDialAttempts = 32

// WithDialStagger sets how long a new connection's TCP connect may wait
// before the store starts another attempt beside it (default
// DefaultDialStagger, from 10ms to 1h; the URL's dial_stagger option).
//
// A SYN lost to a network cut is sent again by the kernel only 1 s after
// the first, then 3 s, 7 s... (Linux 6.5 and later send the first four
// 1 s apart). The pool holds a slot for every connection it is making,
// and a call given up on leaves its dial going on to the connect timeout:
// after a cut of a second or more the slots are all such dials, and a
// call made after the heal waited for the kernel's next SYN, up to 1 s or
// seconds later (a member's OpenSession failed on its deadline so after a
// heal; docs/partitions.md). With a new attempt every 200 ms, a fleet's
// member reaches the store within about 200 ms of the heal (0.29 s to a
// new session against 4.29 s, docs/postgres.md). The earlier attempts go
// on beside it, so a network slower than the stagger still connects; the
// first to connect is kept, within the connect timeout as before. Set it
// above connect_timeout to make one attempt per connection.
func WithDialStagger(d time.Duration) Option {
	return func(c *config) {
		if d >= 10*time.Millisecond && d <= time.Hour {
			c.dialStagger = d
		}
	}
}

// staggered wraps dial, the store's: a TCP connection is dialed by
// attempts started every, until one connects, every one has failed, or
// ctx ends (pgx's connect timeout). A server that refuses the connection
// fails it at once, as one attempt does.
func staggered(dial pgconn.DialFunc, every time.Duration) pgconn.DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if every <= 0 || !strings.HasPrefix(network, "tcp") {
			return dial(ctx, network, addr) // a unix socket connects or fails at once
		}
		c, _, err := stagger.Dial(ctx, every, maxDialAttempts, func(ctx context.Context) (net.Conn, error) {
			return dial(ctx, network, addr)
		})
		return c, err
	}
}
