package redisstore

import "github.com/herdhq/herd/internal/tlscause"

// certCause says in words why the server's certificate was refused, or ""
// if err is not a verification failure (see tlscause.Cert).
func certCause(err error, serverName string) string {
	return tlscause.Cert(err, serverName, tlscause.Hints{
		CA:   "tls_ca names the PEM file of the CA that signed it; without tls_ca the system's CAs are used",
		Name: ", or set tls_server_name",
	})
}

// isTLSAlert reports whether err is an alert the server sent in a TLS
// handshake (see tlscause.IsAlert).
func isTLSAlert(err error) bool { return tlscause.IsAlert(err) }
