package redisstore

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"time"
)

// dialFunc dials one connection (go-redis' Options.Dialer).
type dialFunc = func(ctx context.Context, network, addr string) (net.Conn, error)

// keepAlive is the TCP keep-alive of every connection Open dials: the
// first probe after 60 s without traffic, and a connection whose peer
// answered none of 4 probes 15 s apart fails, 2 minutes after it went
// silent. A wait on the group's log (up to 5 minutes, log.go) is a
// connection without traffic: a server host that died or a network that
// was cut during it is noticed within those 2 minutes (within the 2
// minutes and 10 s of the read deadline when waits lasted 2 minutes), and
// the probes keep the connection in the tables of NATs and load balancers
// that forget idle connections after 4 minutes or more. A server process
// that stops answering while its host's kernel still acknowledges is
// noticed at the wait's read deadline (the block plus go-redis' 10 s).
var keepAlive = net.KeepAliveConfig{Enable: true, Idle: time.Minute, Interval: 15 * time.Second, Count: 4}

// dialer returns the dial function of every connection Open makes: base
// (nil: TCP or a unix socket, with keep-alives), then for TLS the
// handshake, both within the attempt's deadline (the pool sets DialTimeout
// per attempt). A TLS handshake with a plain Redis port fails at that
// deadline or at once, with a message saying so, instead of an opaque
// timeout. Every TCP connection is reset when closed (resetOnClose).
func dialer(timeout time.Duration, cfg *tls.Config, base dialFunc) dialFunc {
	if timeout <= 0 {
		timeout = defaultDialTimeout
	}
	if base == nil {
		d := net.Dialer{KeepAliveConfig: keepAlive}
		base = d.DialContext
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, timeout)
			defer cancel()
		}
		conn, err := base(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if err := resetOnClose(conn); err != nil {
			_ = conn.Close()
			return nil, fmt.Errorf("setting SO_LINGER on the connection to %s: %w", addr, err)
		}
		if cfg == nil {
			return conn, nil
		}
		c := cfg.Clone()
		if c.ServerName == "" {
			if host, _, err := net.SplitHostPort(addr); err == nil {
				c.ServerName = host
			}
		}
		tc := tls.Client(conn, c)
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = conn.Close()
			if cause := certCause(err, c.ServerName); cause != "" {
				return nil, fmt.Errorf("TLS handshake with %s failed: the server's certificate is not accepted: %s: %w", addr, cause, err)
			}
			if isTLSAlert(err) {
				return nil, fmt.Errorf("TLS handshake with %s failed: the server refused the handshake (a client certificate it does not accept? tls_cert and tls_key give one): %w", addr, err)
			}
			return nil, fmt.Errorf("TLS handshake with %s failed: is the server speaking TLS? (rediss:// needs a TLS port; a plain port wants redis://): %w", addr, err)
		}
		return tc, nil
	}
}

// resetOnClose makes closing a TCP connection reset it (SO_LINGER 0): the
// kernel drops what the server has not acknowledged instead of sending it
// on.
//
// go-redis closes a connection when a call on it fails on its deadline or
// the network. When the network is cut, the call's request is then still
// in the kernel's send queue, and a plain close leaves the kernel sending
// it again on its back-off (for minutes): Redis runs it when the network
// comes back, seconds after the caller was told that the call failed. An
// OpenSession given up on during a cut opened, after the heal, a session
// that nobody renews; the other members handed partitions to it, and they
// sat idle until it expired (docs/partitions.md). With a reset, a call
// given up on reaches the server before the close or never (a reply lost
// is OpenSession's to handle: see store.Ghosts). A connection closed for any
// other reason has no request under way (idle, or the store closed), so
// the reset costs nothing there.
func resetOnClose(conn net.Conn) error {
	tc, ok := conn.(*net.TCPConn)
	if !ok {
		return nil // a unix socket: no network to cross
	}
	return tc.SetLinger(0)
}
