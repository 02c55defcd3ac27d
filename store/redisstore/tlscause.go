package redisstore

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// certCause says in words why the server's certificate was refused, or ""
// if err is not a verification failure. err is kept in the chain by the
// caller; this names the cause first, with what to change.
func certCause(err error, serverName string) string {
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	var ci x509.CertificateInvalidError
	var cv *tls.CertificateVerificationError
	switch {
	case errors.As(err, &ua):
		return "it is signed by an unknown authority (tls_ca names the PEM file of the CA that signed it; without tls_ca the system's CAs are used)"
	case errors.As(err, &ci) && ci.Reason == x509.Expired:
		cert := ci.Cert
		if cert != nil && time.Now().After(cert.NotAfter) {
			return fmt.Sprintf("it expired at %s (renew the server's certificate)", cert.NotAfter.UTC().Format(time.RFC3339))
		}
		if cert != nil {
			return fmt.Sprintf("it is not valid before %s (is this machine's clock right?)", cert.NotBefore.UTC().Format(time.RFC3339))
		}
		return "it has expired or is not yet valid"
	case errors.As(err, &hn):
		return fmt.Sprintf("it is not valid for %q (connect by a name it lists, or set tls_server_name)", serverName)
	case errors.As(err, &ci):
		return "it is not valid: " + ci.Error()
	case errors.As(err, &cv):
		return "it failed verification"
	}
	return ""
}

// isTLSAlert reports whether err is an alert the server sent in a TLS
// handshake ("remote error: tls: certificate required", "... bad
// certificate"): crypto/tls reports a received alert as a *net.OpError
// whose Op is "remote error".
func isTLSAlert(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "remote error" && oe.Err != nil && strings.HasPrefix(oe.Err.Error(), "tls: ")
}
