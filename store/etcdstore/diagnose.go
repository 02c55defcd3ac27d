package etcdstore

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/url"
	"syscall"
	"time"

	"github.com/herdhq/herd/internal/tlscause"
)

// diagnoseTimeout bounds the handshake diagnose makes after Open's probe
// failed.
const diagnoseTimeout = 3 * time.Second

// diagnose says in words why the endpoint ep (http:// or https://
// host:port) refused the client, when the cause is its transport: the
// server's certificate not accepted, a client certificate refused, TLS
// on one side only. It returns "" when it finds none of these (the
// server is down, has no leader, or the handshake went well). The gRPC
// client reports all of them as a deadline exceeded.
func diagnose(ctx context.Context, ep string, cfg *tls.Config) string {
	u, err := url.Parse(ep)
	if err != nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, diagnoseTimeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return ""
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	secure := cfg != nil
	c := &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12} //nolint:gosec // only asks whether the port speaks TLS
	if secure {
		c = cfg.Clone()
		c.ServerName = u.Hostname()
	}
	c.NextProtos = []string{"h2"}
	tc := tls.Client(conn, c)
	err = tc.HandshakeContext(ctx)
	handshake := err
	if err == nil {
		// TLS 1.3: the server checks the client's certificate after the
		// client's side of the handshake is done, and says so on the
		// first read.
		_ = tc.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		_, err = tc.Read(make([]byte, 1))
	}
	if !secure {
		if err == nil || isTLSAlert(err) {
			return "the server speaks TLS: use etcds:// (with ca, and cert and key if it wants a client certificate)"
		}
		return ""
	}
	switch {
	case certCause(err, u.Hostname()) != "":
		return "the server's certificate is not accepted: " + certCause(err, u.Hostname()) + ": " + err.Error()
	case isTLSAlert(err):
		return "the server refused the TLS connection (it requires a client certificate it accepts: cert and key, or HERD_ETCD_CERT and HERD_ETCD_KEY, give one): " + err.Error()
	case errors.Is(handshake, io.EOF), errors.Is(handshake, syscall.ECONNRESET):
		// etcd's plain port reads a ClientHello, matches no protocol it
		// serves there, and closes the connection.
		return "the server closed the connection in the TLS handshake: it does not speak TLS (use etcd:// for a plain port): " + handshake.Error()
	}
	return ""
}

// certCause says in words why the server's certificate was refused, or ""
// if err is not a verification failure (see tlscause.Cert).
func certCause(err error, serverName string) string {
	return tlscause.Cert(err, serverName, tlscause.Hints{
		CA: "ca= or HERD_ETCD_CA names the PEM file of the CA that signed it; without it the system's CAs are used",
	})
}

// isTLSAlert reports whether err is an alert the server sent in a TLS
// handshake (see tlscause.IsAlert).
func isTLSAlert(err error) bool { return tlscause.IsAlert(err) }
