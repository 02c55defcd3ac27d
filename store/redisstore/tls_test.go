package redisstore

import (
	"context"
	"errors"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/herdhq/herd/internal/redistest"
	"github.com/herdhq/herd/internal/testcerts"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/storetest"
)

// aclCommands is the command part of the ACL rule docs/security.md gives
// for herd's user: what neededCommands lists, and ACL DRYRUN so that Open
// can check them. TestTLSACLRuleDocumented keeps the two in step.
const aclCommands = "-@all +evalsha +eval +multi +exec +xread +scan +time +get +set +del +exists " +
	"+hget +hgetall +hmget +hset +hdel +zadd +zrange +zrangebyscore +zrem +zscore +xadd +acl|dryrun"

// tlsEnv is one TLS-only redis-server of the test's own (client
// certificates required), its certificates, and an ACL user with exactly
// aclCommands on the keys herdtls-*.
type tlsEnv struct {
	srv        *redistest.TLSServer
	certs      *testcerts.Set
	user, pass string
}

func newTLSEnv(t *testing.T) *tlsEnv {
	t.Helper()
	certs, err := testcerts.Write(t.TempDir(), "herd-test-client")
	if err != nil {
		t.Fatal(err)
	}
	srv := redistest.StartTLSServer(t, certs, certs.ServerCert, certs.ServerKey)
	e := &tlsEnv{srv: srv, certs: certs, user: "herd-tls", pass: "p@ss:w/rd " + redistest.RandomHex(8)}
	e.addUser(t, e.user, e.pass, aclCommands)
	return e
}

// addUser sets up an ACL user allowed commands on the keys herdtls-*.
func (e *tlsEnv) addUser(t *testing.T, user, pass, commands string) {
	t.Helper()
	args := []any{"ACL", "SETUSER", user, "reset", "on", ">" + pass, "~herdtls-*", "resetchannels"}
	for _, c := range strings.Fields(commands) {
		args = append(args, c)
	}
	must(t, e.srv.Admin(t).Do(ctxT(t), args...).Err(), "ACL SETUSER "+user)
}

// url is the store URL of user on addr with the given CA and the client
// certificate, and a fresh prefix under herdtls-.
func (e *tlsEnv) url(addr, user, pass, ca string, clientCert bool) string {
	q := url.Values{"tls_ca": {ca}, "prefix": {"herdtls-" + redistest.RandomHex(6)}, "dial_timeout": {"3s"}}
	if clientCert {
		q.Set("tls_cert", e.certs.ClientCert)
		q.Set("tls_key", e.certs.ClientKey)
	}
	return "rediss://" + urlEscape(user) + ":" + urlEscape(pass) + "@" + addr + "/0?" + q.Encode()
}

// TestTLS starts one TLS server for every part: the conformance suite as
// the ACL user over verified TLS is the long one.
func TestTLS(t *testing.T) {
	e := newTLSEnv(t)
	good := func() string { return e.url(e.srv.Addr(), e.user, e.pass, e.certs.CA, true) }

	t.Run("conformance", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) store.Store {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			s, err := Open(ctx, good())
			if err != nil {
				t.Fatalf("Open over TLS as %s: %v", e.user, err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		})
	})
	t.Run("wrong_ca", func(t *testing.T) {
		err := openErr(t, e.url(e.srv.Addr(), e.user, e.pass, e.certs.OtherCA, true))
		wantCause(t, err, store.ErrUnavailable, "signed by an unknown authority", "tls_ca")
	})
	t.Run("expired_server_certificate", func(t *testing.T) {
		old := redistest.StartTLSServer(t, e.certs, e.certs.ExpiredCert, e.certs.ExpiredKey)
		err := openErr(t, e.url(old.Addr(), e.user, e.pass, e.certs.CA, true))
		wantCause(t, err, store.ErrUnavailable, "expired at", "renew")
	})
	t.Run("no_client_certificate", func(t *testing.T) {
		err := openErr(t, e.url(e.srv.Addr(), e.user, e.pass, e.certs.CA, false))
		wantCause(t, err, store.ErrUnavailable, "certificate required", "tls_cert and tls_key")
	})
	t.Run("missing_permission", func(t *testing.T) {
		e.addUser(t, "herd-no-zadd", e.pass, strings.Replace(aclCommands, " +zadd", "", 1))
		err := openErr(t, e.url(e.srv.Addr(), "herd-no-zadd", e.pass, e.certs.CA, true))
		wantCause(t, err, store.ErrInvalid, "may not run ZADD", "'zadd'")
	})
	t.Run("missing_permission_without_dryrun", func(t *testing.T) {
		// Open cannot ask; the first use says which command is missing.
		rule := strings.Replace(strings.Replace(aclCommands, " +zadd", "", 1), " +acl|dryrun", "", 1)
		e.addUser(t, "herd-no-dryrun", e.pass, rule)
		s, err := Open(ctxT(t), e.url(e.srv.Addr(), "herd-no-dryrun", e.pass, e.certs.CA, true))
		must(t, err, "Open as a user that may not run ACL DRYRUN")
		defer s.Close()
		_, err = s.OpenSession(ctxT(t), "g", "m", 1, time.Minute)
		if err == nil || !strings.Contains(err.Error(), "may not run ZADD (called by herd's script") {
			t.Fatalf("OpenSession without zadd: %v; want an error naming ZADD", err)
		}
		t.Logf("error: %v", err)
	})
	t.Run("wrong_key_pattern", func(t *testing.T) {
		u := strings.Replace(good(), "prefix=herdtls-", "prefix=other-", 1)
		err := openErr(t, u)
		wantCause(t, err, store.ErrInvalid, "may not use the keys other-", "no permissions to access")
	})
	t.Run("secrets_kept_out", func(t *testing.T) { testTLSSecrets(t, e) })
}

func openErr(t *testing.T, u string) error {
	t.Helper()
	s, err := Open(ctxT(t), u)
	if err == nil {
		_ = s.Close()
		t.Fatalf("Open(%s) succeeded; want an error", u)
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

// The docs give the ACL rule this file tests.
func TestTLSACLRuleDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), aclCommands) {
		t.Fatalf("docs/security.md does not give the ACL rule's commands %q", aclCommands)
	}
	for _, c := range neededCommands("herd") {
		if !strings.Contains(aclCommands, "+"+strings.ToLower(c[0].(string))+" ") {
			t.Fatalf("the ACL rule misses %s, which Open checks", c[0])
		}
	}
}
