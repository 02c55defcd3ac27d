package pgstore

import (
	"bytes"
	"context"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// testTLSSecrets opens stores that fail in every way TestTLS knows, one
// with a client key file in the wrong place, and one that works, and checks
// that no error and no log line holds the password or a line of a key.
func testTLSSecrets(t *testing.T, e *tlsEnv) {
	logs := captureLogs(t)
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
	secrets = append(secrets, keyLines(t, c.ClientKey)...)
	secrets = append(secrets, keyLines(t, c.ServerKey)...)
	for _, err := range errs {
		if err == nil {
			continue
		}
		for _, s := range secrets {
			if strings.Contains(err.Error(), s) {
				t.Fatalf("error %q holds a secret (%q)", err, s)
			}
		}
	}
	out := logs()
	for _, s := range secrets {
		if strings.Contains(out, s) {
			t.Fatalf("the logs hold a secret (%q):\n%s", s, out)
		}
	}
	t.Logf("%d errors and %d bytes of logs checked", len(errs), len(out))
}

// keyLines are the base64 lines of a PEM private key file.
func keyLines(t *testing.T, path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" && !strings.HasPrefix(l, "-----") {
			out = append(out, l)
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s: no key lines", path)
	}
	return out
}

// captureLogs sends slog's default logger, at Debug, to a buffer until t
// ends, and returns a function that reads the buffer.
func captureLogs(t *testing.T) func() string {
	var mu sync.Mutex
	var buf bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&lockedWriter{mu: &mu, w: &buf}, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { slog.SetDefault(old) })
	return func() string { mu.Lock(); defer mu.Unlock(); return buf.String() }
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
