package pgstore

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/herdhq/herd/internal/pgtest"
	"github.com/herdhq/herd/internal/testcerts"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/storetest"
)

// tlsEnv is a PostgreSQL instance of the test's own (ssl=on, hostssl
// lines with scram-sha-256 only), and a user herd, owner of database herd.
type tlsEnv struct {
	srv   *pgtest.TLSServer
	certs *testcerts.Set
	pass  string
}

func (e *tlsEnv) url(pass, ca string) string { return e.srv.URL("herd", pass, "herd", ca) }

// TestTLS starts one server for every part: the conformance suite over
// sslmode=verify-full with a scram-sha-256 password is the long one.
func TestTLS(t *testing.T) {
	certs, err := testcerts.Write(t.TempDir(), "herd")
	if err != nil {
		t.Fatal(err)
	}
	e := &tlsEnv{srv: pgtest.StartTLSServer(t, certs), certs: certs, pass: "p@ss:w/rd " + strings.ToLower(rand.Text()[:12])}
	e.srv.Admin(t, "CREATE ROLE herd LOGIN PASSWORD '"+e.pass+"'")
	e.srv.Admin(t, "CREATE DATABASE herd OWNER herd")

	t.Run("conformance", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) store.Store {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			schema := "herd_tls_" + strings.ToLower(rand.Text()[:12])
			s, err := Open(ctx, withOptions(e.url(e.pass, certs.CA), "schema", schema, "pool_max_conns", "4"))
			if err != nil {
				t.Fatalf("Open over verify-full: %v", err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		})
	})
	t.Run("wrong_ca", func(t *testing.T) {
		err := openErr(t, e.url(e.pass, certs.OtherCA))
		wantCause(t, err, store.ErrUnavailable, "signed by an unknown authority", "sslrootcert")
	})
	t.Run("wrong_password", func(t *testing.T) {
		err := openErr(t, e.url("wrong-"+e.pass, certs.CA))
		wantCause(t, err, store.ErrUnavailable, "password authentication failed")
	})
	t.Run("plaintext_refused", func(t *testing.T) {
		err := openErr(t, strings.Replace(e.url(e.pass, certs.CA), "sslmode=verify-full", "sslmode=disable", 1))
		wantCause(t, err, store.ErrUnavailable, "no encryption")
	})
	t.Run("expired_server_certificate", func(t *testing.T) {
		e.srv.UseCert(t, "expired")
		t.Cleanup(func() { e.srv.UseCert(t, "server") })
		err := openErr(t, e.url(e.pass, certs.CA))
		wantCause(t, err, store.ErrUnavailable, "expired at", "renew")
	})
	t.Run("secrets_kept_out", func(t *testing.T) { testTLSSecrets(t, e) })
	t.Run("prefer_falls_back_to_plaintext", func(t *testing.T) { testPreferWithoutTLS(t, e) })
}

func openErr(t *testing.T, u string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Open(ctx, withOptions(u, "schema", "herd_tls_refused"))
	if err == nil {
		s.Close()
		t.Fatalf("Open succeeded; want an error")
	}
	return err
}

// wantCause checks err wraps sentinel and says every one of words.
func wantCause(t *testing.T, err, sentinel error, words ...string) {
	t.Helper()
	t.Logf("error: %v", err)
	if !errors.Is(err, sentinel) {
		t.Fatalf("error %v; want one wrapping %v", err, sentinel)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("error %q does not say %q", err, w)
		}
	}
}
