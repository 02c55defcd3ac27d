package redisstore

import (
	"context"
	"net"
	"syscall"
	"testing"
)

// Open's connections probe a silent peer after 60 s, 4 times 15 s apart:
// a dead server host is noticed within 2 minutes by a wait on the log that
// lasts 5 (before: probes after 5 minutes, every 5 minutes, 9 times).
func TestDialKeepAlive(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err, "Listen")
	defer ln.Close()
	conn, err := dialer(0, nil, nil)(context.Background(), "tcp", ln.Addr().String())
	must(t, err, "dial")
	defer conn.Close()
	raw, err := conn.(*net.TCPConn).SyscallConn()
	must(t, err, "SyscallConn")
	for _, o := range []struct {
		name             string
		level, opt, want int
	}{
		{"SO_KEEPALIVE", syscall.SOL_SOCKET, syscall.SO_KEEPALIVE, 1},
		{"TCP_KEEPIDLE", syscall.IPPROTO_TCP, syscall.TCP_KEEPIDLE, 60},
		{"TCP_KEEPINTVL", syscall.IPPROTO_TCP, syscall.TCP_KEEPINTVL, 15},
		{"TCP_KEEPCNT", syscall.IPPROTO_TCP, syscall.TCP_KEEPCNT, 4},
	} {
		var v int
		var gerr error
		must(t, raw.Control(func(fd uintptr) { v, gerr = syscall.GetsockoptInt(int(fd), o.level, o.opt) }), "Control")
		must(t, gerr, o.name)
		if v != o.want {
			t.Errorf("%s = %d; want %d", o.name, v, o.want)
		}
	}
}
