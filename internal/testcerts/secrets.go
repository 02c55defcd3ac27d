package testcerts

import (
	"bytes"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
)

// CaptureLogs sends slog's default logger, at Debug, to a buffer until t
// ends, and returns a function that reads the buffer.
func CaptureLogs(t testing.TB) func() string {
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

// KeyLines are the base64 lines of the PEM private key files at paths.
func KeyLines(t testing.TB, paths ...string) []string {
	t.Helper()
	var out []string
	for _, path := range paths {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		n := len(out)
		for _, l := range strings.Split(string(b), "\n") {
			if l != "" && !strings.HasPrefix(l, "-----") {
				out = append(out, l)
			}
		}
		if len(out) == n {
			t.Fatalf("%s: no key lines", path)
		}
	}
	return out
}

// NoSecrets fails t if an error in errs or the logs hold one of secrets.
func NoSecrets(t testing.TB, errs []error, logs string, secrets []string) {
	t.Helper()
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
	for _, s := range secrets {
		if strings.Contains(logs, s) {
			t.Fatalf("the logs hold a secret (%q):\n%s", s, logs)
		}
	}
	t.Logf("%d errors and %d bytes of logs checked", len(errs), len(logs))
}
