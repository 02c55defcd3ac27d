package etcdstore

import (
	"context"
	"log/slog"
	"net"
)

// logConn logs, at debug level through slog.Default(), what the store
// did with a connection and why, with the kernel's view of it: how a
// member's calls fared across a network fault can then be read from its
// log.
func logConn(msg string, c net.Conn, args ...any) {
	l := slog.Default()
	if !l.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	args = append(args, "component", "etcdstore")
	if c != nil {
		args = append(args, "local", c.LocalAddr().String())
		args = append(args, tcpState(c)...)
	}
	l.Debug(msg, args...)
}
