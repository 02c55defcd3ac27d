package pgstore

import (
	"context"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
)

// testPreferWithoutTLS: against a server that does not offer TLS,
// sslmode=prefer connects in plaintext without a word (as docs/security.md
// warns), and sslmode=verify-full refuses to connect, saying why.
func testPreferWithoutTLS(t *testing.T, e *tlsEnv) {
	e.srv.WithoutTLS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	prefer := strings.Replace(e.url(e.pass, e.certs.CA), "sslmode=verify-full", "sslmode=prefer", 1)
	schema := "herd_prefer_" + strings.ToLower(rand.Text()[:12])
	s, err := Open(ctx, withOptions(prefer, "schema", schema))
	if err != nil {
		t.Fatalf("Open with sslmode=prefer, the server without TLS: %v; want a plaintext connection", err)
	}
	defer s.Close()
	defer func() {
		if _, err := s.pool.Exec(context.Background(), "DROP SCHEMA "+quoteIdent(schema)+" CASCADE"); err != nil {
			t.Errorf("dropping the test's schema: %v", err)
		}
	}()
	var ssl bool
	if err := s.pool.QueryRow(ctx, "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").Scan(&ssl); err != nil {
		t.Fatal(err)
	}
	if ssl {
		t.Fatal("sslmode=prefer against a server without TLS: the connection is encrypted; want plaintext (the server has ssl=off)")
	}

	err = openErr(t, e.url(e.pass, e.certs.CA))
	wantCause(t, err, store.ErrUnavailable, "the server does not offer TLS", "ssl = on")
}
