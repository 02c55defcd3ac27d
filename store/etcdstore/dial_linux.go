//go:build linux

package etcdstore

import (
	"context"
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// tcpRTOMax caps the retransmission back-off of the client's sockets.
// The etcd client keeps one connection per endpoint: one that crossed a
// network cut stays open, and without the cap its requests wait for TCP's
// doubling back-off after the heal (about 6 s after the first loss with
// Linux's 200 ms minimum), longer than a session's TTL; with it, a lost
// segment is sent again at least once a second. Linux's minimum for the
// option is 1 s. (docs/partitions.md, etcd: seeds 5, 15, 19 and 20 of
// scripts/partitions -b etcd.)
const tcpRTOMax = time.Second

// tcpRTOMaxOpt is Linux's TCP_RTO_MAX_MS (from Linux 6.15), which
// golang.org/x/sys does not name yet.
const tcpRTOMaxOpt = 44

// dial connects to addr for the gRPC client with the back-off capped
// where the kernel can (older kernels refuse the option: ignored).
func dial(ctx context.Context, addr string) (net.Conn, error) {
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) {
			_ = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, tcpRTOMaxOpt, int(tcpRTOMax/time.Millisecond))
		})
	}}
	return d.DialContext(ctx, "tcp", addr)
}
