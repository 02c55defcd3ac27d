package redisstore

import (
	"bytes"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
)

// testTLSSecrets opens stores that fail in every way the TLS tests know,
// and one that works, and checks that no error and no log line (go-redis'
// own included, at Debug) holds the password or a line of a private key.
func testTLSSecrets(t *testing.T, e *tlsEnv) {
	logs := captureLogs(t)
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
	secrets = append(secrets, keyLines(t, e.certs.ClientKey)...)
	secrets = append(secrets, keyLines(t, e.certs.ServerKey)...)
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
