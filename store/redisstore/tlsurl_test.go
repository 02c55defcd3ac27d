package redisstore

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/herdhq/herd/internal/testcerts"
	"github.com/herdhq/herd/store"
)

func TestParseURLTLSOptions(t *testing.T) {
	c, err := testcerts.Write(t.TempDir(), "client")
	if err != nil {
		t.Fatal(err)
	}
	q := url.Values{"tls_ca": {c.CA}, "tls_cert": {c.ClientCert}, "tls_key": {c.ClientKey}, "tls_server_name": {"localhost"}}.Encode()
	for _, u := range []string{"rediss://h:1/0?" + q, "rediss+cluster://a:1,b:2?" + q, "rediss+sentinel://s:1/m?" + q} {
		tg, err := parseURL(u)
		if err != nil {
			t.Fatalf("parseURL(%s): %v", u, err)
		}
		cfg := probeOptions(tg, "h:1").TLSConfig
		if cfg == nil || cfg.RootCAs == nil || len(cfg.Certificates) != 1 || cfg.ServerName != "localhost" || cfg.InsecureSkipVerify {
			t.Fatalf("parseURL(%s): TLS config %+v; want the CA, the client certificate, server name localhost, verification on", u, cfg)
		}
	}
	for _, tc := range []struct{ url, mention string }{
		{"redis://h?tls_ca=" + c.CA, "needs TLS: use rediss://"},
		{"unix:///s?tls_ca=" + c.CA, "needs TLS"},
		{"rediss://h?tls_cert=" + c.ClientCert, "tls_cert and tls_key go together"},
		{"rediss://h?tls_ca=", "tls_ca is empty"},
		{"rediss://h?tls_ca=/nonexistent/ca.crt", "/nonexistent/ca.crt: no such file"},
		{"rediss://h?tls_ca=" + c.ClientKey, "holds no PEM certificate"},
		{"rediss://h?tls_cert=" + c.ClientCert + "&tls_key=" + c.ServerKey, "tls_key"},
		{"rediss://h?tls_cert=" + c.ClientKey + "&tls_key=" + c.ClientKey, "tls_cert"},
	} {
		_, err := parseURL(tc.url)
		if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), tc.mention) {
			t.Fatalf("parseURL(%q): %v; want ErrInvalid saying %q", tc.url, err, tc.mention)
		}
		for _, l := range testcerts.KeyLines(t, c.ClientKey) {
			if strings.Contains(err.Error(), l) {
				t.Fatalf("parseURL(%q): error %q shows the key", tc.url, err)
			}
		}
	}
}
