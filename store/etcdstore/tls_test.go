package etcdstore

import (
	"context"
	"crypto/rand"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/herdhq/herd/internal/etcdtest"
	"github.com/herdhq/herd/internal/testcerts"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/storetest"
)

// tlsURL is the etcds:// URL of addr with the CA ca, the client
// certificate if clientCert, and userinfo (user:password, or "").
func tlsURL(certs *testcerts.Set, addr, userinfo, ca string, clientCert bool) string {
	q := url.Values{"ca": {ca}, "prefix": {"herdtls/" + strings.ToLower(rand.Text()[:10]) + "/"}}
	if clientCert {
		q.Set("cert", certs.ClientCert)
		q.Set("key", certs.ClientKey)
	}
	if userinfo != "" {
		userinfo += "@"
	}
	return "etcds://" + userinfo + addr + "?" + q.Encode()
}

// TestTLS starts one etcd of its own that serves clients over TLS only and
// requires client certificates (--client-cert-auth): the conformance suite
// over verified TLS, then every way Open must refuse, then user and
// password authentication turned on, and the secrets check.
func TestTLS(t *testing.T) {
	certs, err := testcerts.Write(t.TempDir(), "herd-test-client")
	if err != nil {
		t.Fatal(err)
	}
	srv := etcdtest.StartTLS(t, certs, certs.ServerCert, certs.ServerKey)
	t.Run("conformance", func(t *testing.T) {
		u := tlsURL(certs, srv.Addr(), "", certs.CA, true)
		storetest.RunWith(t, storetest.Options{ExpiryLag: time.Second}, func(t *testing.T) store.Store {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			s, err := Open(ctx, u)
			if err != nil {
				t.Fatalf("Open over TLS: %v", err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		})
	})
	t.Run("wrong_ca", func(t *testing.T) {
		err := openErr(t, tlsURL(certs, srv.Addr(), "", certs.OtherCA, true))
		wantCause(t, err, store.ErrUnavailable, "signed by an unknown authority", "ca=")
	})
	t.Run("expired_server_certificate", func(t *testing.T) {
		old := etcdtest.StartTLS(t, certs, certs.ExpiredCert, certs.ExpiredKey)
		err := openErr(t, tlsURL(certs, old.Addr(), "", certs.CA, true))
		wantCause(t, err, store.ErrUnavailable, "expired at", "renew")
	})
	t.Run("no_client_certificate", func(t *testing.T) {
		err := openErr(t, tlsURL(certs, srv.Addr(), "", certs.CA, false))
		wantCause(t, err, store.ErrUnavailable, "certificate", "cert and key")
	})
	t.Run("plaintext_to_a_tls_port", func(t *testing.T) {
		u := strings.Replace(tlsURL(certs, srv.Addr(), "", certs.CA, false), "etcds://", "etcd://", 1)
		u = u[:strings.Index(u, "?")]
		err := openErr(t, u)
		wantCause(t, err, store.ErrUnavailable, "etcds://")
	})
	t.Run("tls_to_a_plain_port", func(t *testing.T) {
		plain := strings.TrimPrefix(etcdtest.Need(t), "etcd://")
		err := openErr(t, tlsURL(certs, plain, "", certs.CA, true))
		wantCause(t, err, store.ErrUnavailable, "does not speak TLS", "etcd://")
	})
	t.Run("password", func(t *testing.T) { testTLSAuth(t, srv, certs) })
}

// testTLSAuth turns authentication on, opens a store as a user whose role
// may use only the keys under herdtls/, and checks that a wrong password
// fails at Open and that no error or log holds a secret.
func testTLSAuth(t *testing.T, srv *etcdtest.TLSServer, certs *testcerts.Set) {
	pass := "p@ss:w/rd " + strings.ToLower(rand.Text()[:12])
	srv.EnableAuth(t, "root-"+pass, "herd", pass, "herdtls/")
	logs := testcerts.CaptureLogs(t)
	userinfo := func(p string) string { return "herd:" + url.PathEscape(p) }

	s, err := Open(ctxT(t), tlsURL(certs, srv.Addr(), userinfo(pass), certs.CA, true))
	if err != nil {
		t.Fatalf("Open as a user with a password: %v", err)
	}
	sess, err := s.OpenSession(ctxT(t), "g", "m", 1, time.Minute)
	if err != nil {
		t.Fatalf("OpenSession as the user: %v", err)
	}
	if rs, err := s.ClaimBatch(ctxT(t), "g", sess, []string{"p1"}); err != nil || rs[0].Err != nil {
		t.Fatalf("ClaimBatch as the user: %v, %+v", err, rs)
	}
	_ = s.Close()

	var errs []error
	errs = append(errs, openErr(t, tlsURL(certs, srv.Addr(), userinfo("wrong-"+pass), certs.CA, true)))
	wantCause(t, errs[0], store.ErrUnavailable, "authentication failed for user \"herd\"", "HERD_ETCD_PASSWORD")
	outside := strings.Replace(tlsURL(certs, srv.Addr(), userinfo(pass), certs.CA, true), "prefix=herdtls", "prefix=other", 1)
	errs = append(errs, openErr(t, outside))
	wantCause(t, errs[1], store.ErrInvalid, "permission denied", "other")
	for _, u := range []string{
		tlsURL(certs, srv.Addr(), userinfo(pass), certs.OtherCA, true),
		tlsURL(certs, srv.Addr(), userinfo(pass), certs.CA, false),
		tlsURL(certs, srv.Addr(), userinfo(pass), certs.ClientKey, true), // a key as the CA
		strings.Replace(tlsURL(certs, srv.Addr(), userinfo(pass), certs.CA, true), "cert=", "cert=x", 1),
	} {
		errs = append(errs, openErr(t, u))
	}
	secrets := []string{pass, url.PathEscape(pass), url.QueryEscape(pass), "wrong-" + pass, "root-" + pass}
	secrets = append(secrets, testcerts.KeyLines(t, certs.ClientKey, certs.ServerKey)...)
	testcerts.NoSecrets(t, errs, logs(), secrets)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// openErr opens u and returns the error, failing t if Open succeeds or
// takes longer than its dial timeout and a margin.
func openErr(t *testing.T, u string) error {
	t.Helper()
	start := time.Now()
	s, err := Open(ctxT(t), u)
	if err == nil {
		_ = s.Close()
		t.Fatalf("Open succeeded; want an error")
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Fatalf("Open took %v to fail; want it within its 5 s dial timeout", d)
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
