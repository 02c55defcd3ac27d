//go:build !linux

package etcdstore

import (
	"context"
	"net"
)

// dial connects to addr for the gRPC client (the back-off cap of
// dial_linux.go is Linux's only).
func dial(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}
