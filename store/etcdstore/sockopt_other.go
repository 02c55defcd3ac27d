//go:build !linux

package etcdstore

import (
	"net"
	"syscall"
	"time"
)

// userTimeout is a dialer's Control that does nothing where TCP_USER_TIMEOUT
// is Linux's alone.
func userTimeout(time.Duration) func(network, address string, c syscall.RawConn) error {
	return nil
}

// retransmitting cannot read a connection's TCP state here.
func retransmitting(net.Conn) (lossy, known bool) { return false, false }

// stalled cannot read a connection's TCP state here.
func stalled(net.Conn) bool { return false }

// unackedFor cannot read a connection's TCP state here.
func unackedFor(net.Conn, time.Duration) bool { return false }

// tcpState cannot read a connection's TCP state here.
func tcpState(net.Conn) []any { return nil }
