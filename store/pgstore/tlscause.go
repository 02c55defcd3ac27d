package pgstore

import (
	"crypto/x509"
	"errors"
	"fmt"
	"time"
)

// certCause says in words why the server's certificate was refused, or ""
// if err is not a verification failure. The original error stays in the
// chain; this names the cause first, with what to change.
func certCause(err error) string {
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	var ci x509.CertificateInvalidError
	switch {
	case errors.As(err, &ua):
		return "it is signed by an unknown authority (sslrootcert names the PEM file of the CA that signed it)"
	case errors.As(err, &ci) && ci.Reason == x509.Expired && ci.Cert != nil:
		if time.Now().After(ci.Cert.NotAfter) {
			return fmt.Sprintf("it expired at %s (renew the server's certificate)", ci.Cert.NotAfter.UTC().Format(time.RFC3339))
		}
		return fmt.Sprintf("it is not valid before %s (is this machine's clock right?)", ci.Cert.NotBefore.UTC().Format(time.RFC3339))
	case errors.As(err, &hn):
		return fmt.Sprintf("it is not valid for the host %q (sslmode=verify-full checks the URL's host against it)", hn.Host)
	case errors.As(err, &ci):
		return "it is not valid: " + ci.Error()
	}
	return ""
}
