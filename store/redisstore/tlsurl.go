package redisstore

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
)

// tlsFiles are the TLS settings of a rediss:// URL that go-redis' own
// parser does not read: the CA to trust, the client certificate and key,
// the name to check the server's certificate against. Files are read when
// the URL is parsed (by Open), so a missing or unreadable file fails there.
type tlsFiles struct {
	roots      *x509.CertPool    // nil: the system's roots
	certs      []tls.Certificate // the client certificate, if any
	serverName string            // "" : the host of the URL
}

// parseTLSOptions takes tls_ca, tls_cert, tls_key and tls_server_name out
// of q and reads the files they name. Errors name the option and the file
// but never the file's contents (a key is a secret).
func parseTLSOptions(t *target, q url.Values, tlsScheme bool) (*tlsFiles, error) {
	ca, cert, key, name := q.Get("tls_ca"), q.Get("tls_cert"), q.Get("tls_key"), q.Get("tls_server_name")
	for _, k := range []string{"tls_ca", "tls_cert", "tls_key", "tls_server_name"} {
		if q.Has(k) && !tlsScheme {
			return nil, invalid(t.redacted, "option %s needs TLS: use rediss:// (rediss+cluster://, rediss+sentinel://)", k)
		}
		if q.Has(k) && q.Get(k) == "" {
			return nil, invalid(t.redacted, "option %s is empty", k)
		}
		q.Del(k)
	}
	if !tlsScheme {
		return nil, nil
	}
	f := &tlsFiles{serverName: name}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, invalid(t.redacted, "tls_ca: %v", readErr(err))
		}
		f.roots = x509.NewCertPool()
		if !f.roots.AppendCertsFromPEM(pem) {
			return nil, invalid(t.redacted, "tls_ca: %s holds no PEM certificate", ca)
		}
	}
	if (cert == "") != (key == "") {
		return nil, invalid(t.redacted, "tls_cert and tls_key go together: the client certificate and its private key, PEM files")
	}
	if cert != "" {
		c, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, invalid(t.redacted, "tls_cert %s and tls_key %s: %v (want PEM files, the key unencrypted, matching the certificate)", cert, key, readErr(err))
		}
		f.certs = []tls.Certificate{c}
	}
	return f, nil
}

// readErr is err without anything of the file's contents: os errors name
// the path and the cause; the x509 and tls parsers name the cause only.
func readErr(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %v", pe.Path, pe.Err)
	}
	return errors.New(strings.TrimPrefix(err.Error(), "tls: "))
}

// apply sets f on cfg, the TLS configuration go-redis made for a rediss://
// URL (server name, TLS 1.2 or later; verification on unless skip_verify).
func (f *tlsFiles) apply(cfg *tls.Config) {
	if f == nil || cfg == nil {
		return
	}
	if f.roots != nil {
		cfg.RootCAs = f.roots
	}
	if f.certs != nil {
		cfg.Certificates = f.certs
	}
	if f.serverName != "" {
		cfg.ServerName = f.serverName
	}
}
