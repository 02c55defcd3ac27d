package etcdstore

import (
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// userTimeout is a dialer's Control that sets TCP_USER_TIMEOUT to d: the
// kernel ends a connection whose data has gone unacknowledged that long
// (what gRPC sets from the keep-alive timeout on connections it dials
// itself).
func userTimeout(d time.Duration) func(network, address string, c syscall.RawConn) error {
	return func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(d/time.Millisecond))
		})
		if err != nil {
			return err
		}
		return serr
	}
}

// retransmitting reports whether the kernel holds data of c that the
// other end has not acknowledged and that it has had to send again (a
// retransmission timeout or a segment marked lost): the path drops what
// is sent on it. known is false when c's TCP state cannot be read.
func retransmitting(c net.Conn) (lossy, known bool) {
	info := tcpInfo(c)
	if info == nil {
		return false, false
	}
	return info.Unacked > 0 && (info.Retransmits > 0 || info.Backoff > 0 || info.Lost > 0), true
}

// tcpInfo is c's TCP state, nil if it cannot be read.
func tcpInfo(c net.Conn) *unix.TCPInfo {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	var info *unix.TCPInfo
	if rc.Control(func(fd uintptr) { info, _ = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) }) != nil {
		return nil
	}
	return info
}

// stalled reports whether the kernel holds data of c unacknowledged
// through two retransmission timeouts at least (0.6 s on a fast path): a
// call sent on c now would wait behind it for the next retransmission,
// seconds away after a long loss.
func stalled(c net.Conn) bool {
	info := tcpInfo(c)
	return info != nil && info.Unacked > 0 && info.Backoff >= 2
}

// unackedFor reports whether the kernel holds data of c that the other
// end has not acknowledged, sent again, or sent d ago at least.
func unackedFor(c net.Conn, d time.Duration) bool {
	info := tcpInfo(c)
	return info != nil && info.Unacked > 0 &&
		(info.Retransmits > 0 || info.Backoff > 0 || info.Lost > 0 || time.Duration(info.Last_data_sent)*time.Millisecond >= d)
}

// tcpState is c's TCP state as log attributes (none if it cannot be read).
func tcpState(c net.Conn) []any {
	info := tcpInfo(c)
	if info == nil {
		return nil
	}
	return []any{"unacked", info.Unacked, "retransmits", info.Retransmits, "backoff", info.Backoff,
		"lost", info.Lost, "rto", time.Duration(info.Rto) * time.Microsecond,
		"last_data_recv", time.Duration(info.Last_data_recv) * time.Millisecond,
		"last_ack_recv", time.Duration(info.Last_ack_recv) * time.Millisecond}
}
