package pgstore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		raw      string
		pgx      string
		redacted string
		check    func(c config) bool
	}{
		{"postgres://u:pw@h:5432/db", "postgres://u:pw@h:5432/db", "postgres://u:xxxxx@h:5432/db", nil},
		{"POSTGRESQL://h/db?sslmode=disable", "postgresql://h/db?sslmode=disable", "postgresql://h/db?sslmode=disable", nil},
		{"postgres://h1:5432,h2:5433/db?target_session_attrs=read-write", "postgres://h1:5432,h2:5433/db?target_session_attrs=read-write",
			"postgres://h1:5432,h2:5433/db?target_session_attrs=read-write", nil},
		{"postgres://h/db?schema=myapp&listen=off&poll_interval=2s&log_limit=50&pool_max_conns=3",
			"postgres://h/db?pool_max_conns=3", "postgres://h/db?listen=off&log_limit=50&poll_interval=2s&pool_max_conns=3&schema=myapp",
			func(c config) bool {
				return c.schema == "myapp" && !c.listen && c.poll == 2*time.Second && c.logLimit == 50
			}},
		{"postgres://h/db?tx_idle_timeout=3s&record_lock_timeout=250ms",
			"postgres://h/db", "postgres://h/db?record_lock_timeout=250ms&tx_idle_timeout=3s",
			func(c config) bool { return c.txIdle == 3*time.Second && c.lockTimeout == 250*time.Millisecond }},
		{"postgres://h/db?dial_stagger=500ms&connect_timeout=3", "postgres://h/db?connect_timeout=3",
			"postgres://h/db?connect_timeout=3&dial_stagger=500ms",
			func(c config) bool { return c.dialStagger == 500*time.Millisecond }},
		{"postgres://u:p%40ss%2Fw@h/db?sslpassword=secretkey", "postgres://u:p%40ss%2Fw@h/db?sslpassword=secretkey",
			"postgres://u:xxxxx@h/db?sslpassword=xxxxx", nil},
		{"postgres:///db", "postgres:///db", "postgres:///db", nil},
	} {
		tg, err := parseURL(tc.raw)
		if err != nil {
			t.Errorf("parseURL(%q): %v", tc.raw, err)
			continue
		}
		if tg.pgxURL != tc.pgx || tg.redacted != tc.redacted {
			t.Errorf("parseURL(%q) = pgx %q, redacted %q; want %q, %q", tc.raw, tg.pgxURL, tg.redacted, tc.pgx, tc.redacted)
		}
		c := config{listen: true}
		for _, o := range tg.opts {
			o(&c)
		}
		if tc.check != nil && !tc.check(c) {
			t.Errorf("parseURL(%q) options give %+v", tc.raw, c)
		}
	}
}

func TestParseURLInvalid(t *testing.T) {
	const pw = "Sup3rSecretPw"
	for _, raw := range []string{
		"",
		"redis://h",
		"postgres//h",
		"postgres://u:" + pw + "@h/db?schema=Bad-Name",
		"postgres://u:" + pw + "@h/db?schema=pg_x",
		"postgres://u:" + pw + "@h/db?schema=" + strings.Repeat("a", 49),
		"postgres://u:" + pw + "@h/db?listen=maybe",
		"postgres://u:" + pw + "@h/db?poll_interval=1ns",
		"postgres://u:" + pw + "@h/db?log_limit=0",
		"postgres://u:" + pw + "@h/db?record_lock_timeout=forever",
		"postgres://u:" + pw + "@h/db?dial_stagger=5ms",
		"postgres://u:" + pw + "@h/db?schema=a&schema=b",
		"postgres://u:" + pw + "/x@h/db",
		"postgres://u:" + pw + "@h/db#frag",
		"postgres://u:" + pw + "@h/db\n",
		"postgres://u:%zz" + pw + "@h/db",
		"postgres://u:" + pw + "@h/db?%zz",
	} {
		_, err := parseURL(raw)
		if !errors.Is(err, store.ErrInvalid) {
			t.Errorf("parseURL(%q): %v; want ErrInvalid", raw, err)
			continue
		}
		if strings.Contains(err.Error(), pw) {
			t.Errorf("parseURL error shows the password: %v", err)
		}
	}
}

// No error of Open, and none of a call on a store that was opened, shows
// the password, in any of its encodings.
func TestPasswordNeverShown(t *testing.T) {
	requireServer(t)
	const pw = "Pw-s3cret/with@odd?chars"
	enc := "Pw-s3cret%2Fwith%40odd%3Fchars"
	forms := []string{pw, enc, "s3cret"}
	base := "postgres://postgres:" + enc + "@127.0.0.1:5432/"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	check := func(what string, err error, want error) {
		t.Helper()
		if err == nil {
			t.Errorf("%s: nil error", what)
			return
		}
		for _, f := range forms {
			if strings.Contains(err.Error(), f) {
				t.Errorf("%s: the error shows the password: %v", what, err)
			}
		}
		if want != nil && !errors.Is(err, want) {
			t.Errorf("%s: %v; want %v", what, err, want)
		}
	}
	for _, tc := range []struct {
		url  string
		want error
	}{
		{"postgres://postgres:" + enc + "@127.0.0.1:1/test?connect_timeout=2", store.ErrUnavailable},
		{base + "test?connect_timeout=abc", store.ErrInvalid},
		{base + "test?sslmode=bogus", store.ErrInvalid},
		{base + "test?sslmode=disable&no_such_parameter_herd=1", store.ErrInvalid},
		{base + "herd_no_such_database?sslmode=disable", store.ErrInvalid},
		{base + "test?sslmode=disable&schema=BAD", store.ErrInvalid},
		{base + "test?sslmode=disable&pool_max_conns=x", store.ErrInvalid},
		{"postgres://postgres:" + enc + "@no-such-host.invalid/test?connect_timeout=2", store.ErrUnavailable},
	} {
		_, err := Open(ctx, tc.url)
		check("Open("+strings.ReplaceAll(tc.url, enc, "xxxxx")+")", err, tc.want)
	}
	// A store that opened (trust authentication ignores the password):
	// errors of its calls do not show it either.
	schema := newSchema(t)
	s, err := Open(ctx, base+"test?sslmode=disable&schema="+schema)
	if err != nil {
		t.Fatalf("Open with a password under trust authentication: %v", err)
	}
	s.Close()
	_, err = s.Snapshot(ctx, "g")
	check("Snapshot on a closed store", err, store.ErrUnavailable)
	admin(t, "SELECT 1") // the server is fine
}
