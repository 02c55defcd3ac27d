package redisstore

import (
	"net/url"
	"testing"

	"github.com/herdhq/herd/internal/testcerts"
)

// testTLSSecrets opens stores that fail in every way the TLS tests know,
// and one that works, and checks that no error and no log line (go-redis'
// own included, at Debug) holds the password or a line of a private key.
func testTLSSecrets(t *testing.T, e *tlsEnv) {
	logs := testcerts.CaptureLogs(t)
	addr := e.srv.Addr()
	q := url.Values{"tls_ca": {e.certs.CA}, "tls_cert": {e.certs.ClientKey}, "tls_key": {e.certs.ClientKey}}
	swapped := "rediss://" + urlEscape(e.user) + ":" + urlEscape(e.pass) + "@" + addr + "/0?" + q.Encode()
	var errs []error
	for _, u := range []string{
		e.url(addr, e.user, "wrong-"+e.pass, e.certs.CA, true),
		e.url(addr, e.user, e.pass, e.certs.OtherCA, true),
		e.url(addr, e.user, e.pass, e.certs.CA, false),
		e.url(addr, e.user, e.pass, e.certs.ClientKey, true), // a key as the CA
		swapped, // the key as the certificate
	} {
		errs = append(errs, openErr(t, u))
	}
	s, err := Open(ctxT(t), e.url(addr, e.user, e.pass, e.certs.CA, true))
	must(t, err, "Open")
	_, err = s.OpenSession(ctxT(t), "g", "m", 1, 0)
	errs = append(errs, err) // an invalid TTL
	_ = s.Close()

	secrets := []string{e.pass, urlEscape(e.pass), "wrong-" + e.pass}
	secrets = append(secrets, testcerts.KeyLines(t, e.certs.ClientKey, e.certs.ServerKey)...)
	testcerts.NoSecrets(t, errs, logs(), secrets)
}
