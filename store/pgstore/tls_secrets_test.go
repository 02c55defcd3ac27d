package pgstore

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/herdhq/herd/internal/testcerts"
)

// testTLSSecrets opens stores that fail in every way TestTLS knows, one
// with a client key file in the wrong place, and one that works, and checks
// that no error and no log line holds the password or a line of a key.
func testTLSSecrets(t *testing.T, e *tlsEnv) {
	logs := testcerts.CaptureLogs(t)
	c := e.certs
	var errs []error
	for _, u := range []string{
		e.url("wrong-"+e.pass, c.CA),
		e.url(e.pass, c.OtherCA),
		e.url(e.pass, c.ClientKey), // a key as the CA
		withOptions(e.url(e.pass, c.CA), "sslcert", c.ClientKey, "sslkey", c.ClientKey),
		withOptions(e.url(e.pass, c.CA), "sslcert", c.ClientCert, "sslkey", c.ServerKey),
		withOptions(e.url(e.pass, c.CA), "no_such_option", "1"),
	} {
		errs = append(errs, openErr(t, u))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Open(ctx, withOptions(e.url(e.pass, c.CA), "schema", "herd_tls_secrets", "sslcert", c.ClientCert, "sslkey", c.ClientKey))
	if err != nil {
		t.Fatalf("Open with a client certificate: %v", err)
	}
	_, err = s.OpenSession(ctx, "g", "m", 1, 0)
	errs = append(errs, err) // an invalid TTL
	s.Close()

	secrets := []string{e.pass, url.QueryEscape(e.pass), url.PathEscape(e.pass), "wrong-" + e.pass}
	secrets = append(secrets, testcerts.KeyLines(t, c.ClientKey, c.ServerKey)...)
	testcerts.NoSecrets(t, errs, logs(), secrets)
}
