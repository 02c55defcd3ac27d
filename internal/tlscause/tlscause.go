// Package tlscause says in words why a TLS connection to a store was
// refused, for the backends' errors: the cause first, with what to change;
// callers keep the original error in the chain.
package tlscause

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// Hints are the backend's words for its settings, used in the causes.
type Hints struct {
	// CA says which setting names the CA file, e.g. "tls_ca names the PEM
	// file of the CA that signed it".
	CA string
	// Name says how to connect by a name the certificate lists (appended
	// to "connect by a name it lists").
	Name string
}

// Cert says why the server's certificate was refused, or "" if err is
// not a verification failure. serverName is the name it was checked
// against.
func Cert(err error, serverName string, h Hints) string {
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	var ci x509.CertificateInvalidError
	var cv *tls.CertificateVerificationError
	switch {
	case errors.As(err, &ua):
		return "it is signed by an unknown authority (" + h.CA + ")"
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
		if serverName == "" && hn.Host != "" {
			serverName = hn.Host
		}
		return fmt.Sprintf("it is not valid for %q (connect by a name it lists%s)", serverName, h.Name)
	case errors.As(err, &ci):
		return "it is not valid: " + ci.Error()
	case errors.As(err, &cv):
		return "it failed verification"
	}
	return ""
}

// IsAlert reports whether err is an alert the server sent in a TLS
// handshake ("remote error: tls: certificate required", "... bad
// certificate"): crypto/tls reports a received alert as a *net.OpError
// whose Op is "remote error".
func IsAlert(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "remote error" && oe.Err != nil && strings.HasPrefix(oe.Err.Error(), "tls: ")
}
