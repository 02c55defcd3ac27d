package redisstore

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herdhq/herd/internal/redistest"
	"github.com/herdhq/herd/store"
)

func TestParseURLForms(t *testing.T) {
	for _, tc := range []struct {
		url    string
		kind   deployment
		addrs  []string
		db     int
		master string
		prefix string
		user   string
		pass   string
	}{
		{url: "redis://h", kind: single, addrs: []string{"h:6379"}},
		{url: "redis://", kind: single, addrs: []string{"localhost:6379"}},
		{url: "redis://u:p%40ss@h:7000/3?prefix=x", kind: single, addrs: []string{"h:7000"}, db: 3, prefix: "x", user: "u", pass: "p@ss"},
		{url: "redis://:pw@h?db=2", kind: single, addrs: []string{"h:6379"}, db: 2, pass: "pw"},
		{url: "rediss://[::1]:7000/0", kind: single, addrs: []string{"[::1]:7000"}},
		{url: "redis+cluster://a:7000,b:7001,c", kind: cluster, addrs: []string{"a:7000", "b:7001", "c:6379"}},
		{url: "redis+cluster://a:7000?addr=b:7001&addr=c:7002", kind: cluster, addrs: []string{"a:7000", "b:7001", "c:7002"}},
		{url: "rediss+cluster://u:pw@a:7000/0", kind: cluster, addrs: []string{"a:7000"}, user: "u", pass: "pw"},
		{url: "redis+sentinel://s1,s2:26380/mymaster/2", kind: sentinel, addrs: []string{"s1:26379", "s2:26380"}, master: "mymaster", db: 2},
		{url: "redis+sentinel://:pw@s1?master_name=m&addr=s2:1", kind: sentinel, addrs: []string{"s1:26379", "s2:1"}, master: "m", pass: "pw"},
	} {
		tg, err := parseURL(tc.url)
		if err != nil {
			t.Fatalf("parseURL(%q): %v", tc.url, err)
		}
		if tg.kind != tc.kind || !slices.Equal(tg.addrs(), tc.addrs) || tg.prefix != tc.prefix {
			t.Fatalf("parseURL(%q) = %v %v prefix %q; want %v %v prefix %q", tc.url, tg.kind, tg.addrs(), tg.prefix, tc.kind, tc.addrs, tc.prefix)
		}
		var db int
		var user, pass, master string
		switch tg.kind {
		case single:
			db, user, pass = tg.single.DB, tg.single.Username, tg.single.Password
		case cluster:
			user, pass = tg.cluster.Username, tg.cluster.Password
		case sentinel:
			db, user, pass, master = tg.failover.DB, tg.failover.Username, tg.failover.Password, tg.failover.MasterName
		}
		if db != tc.db || user != tc.user || pass != tc.pass || master != tc.master {
			t.Fatalf("parseURL(%q): db %d user %q pass %q master %q; want %d %q %q %q", tc.url, db, user, pass, master, tc.db, tc.user, tc.pass, tc.master)
		}
		if tc.pass != "" && strings.Contains(tg.redacted, tc.pass) {
			t.Fatalf("redacted URL %q shows the password", tg.redacted)
		}
	}
	tg, err := parseURL("redis+sentinel://s1/m?sentinel_password=sekr3t")
	if err != nil || tg.failover.SentinelPassword != "sekr3t" || strings.Contains(tg.redacted, "sekr3t") {
		t.Fatalf("sentinel_password: %v, %+v", err, tg)
	}
}

func TestParseURLRejects(t *testing.T) {
	for _, tc := range []struct{ url, mention string }{
		{"redis://h/-1", "database"},
		{"redis://h/+1", "database"},
		{"redis://h?db=-1", "database"},
		{"redis://h/1?db=2", "database given twice"},
		{"redis://h:0", "port"},
		{"redis://h:65536", "port"},
		{"redis://a,b", "redis+cluster://"},
		{"redis://h?addr=b:1", "redis+cluster://"},
		{"redis+cluster://a,,b", "empty host"},
		{"redis+cluster://a/1", "only database 0"},
		{"redis+cluster://", "no host"},
		{"redis+sentinel://s1", "no master name"},
		{"redis+sentinel://s1/m/0/1", "mastername[/db]"},
		{"redis+sentinel://s1/m?master_name=n", "master name given twice"},
		{"redis+sentinel://s1/m?password=x", "user info"},
		{"redis://h?dial_timeout=1s&dial_timeout=2s", "given 2 times"},
		{"redis://h?nosuch=1", "herd's options"},
		{"redis://h?dial_timeout=forever", "Go duration"},
		{"redis+cluster://h?pool_size=many", "integer"},
		{"redis+sentinel://h/m?read_only=maybe", "unexpected option"},
		{"redis+sentinel://h/m?replica_only=maybe", "true/false"},
		{"redis://h?prefix=a%7Bb", "brace"},
		{"redis://h#frag", "fragment"},
		{"http://h", "unknown scheme"},
		{"h:6379", "scheme"},
		{"redis://::1:6379", "brackets"},
		{"unix://h/sock", "no host"},
		{"unix://", "socket path"},
	} {
		_, err := parseURL(tc.url)
		if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), tc.mention) {
			t.Fatalf("parseURL(%q) = %v; want ErrInvalid mentioning %q", tc.url, err, tc.mention)
		}
	}
	// The password never appears, whatever is wrong.
	for _, u := range []string{
		"redis://u:sekr3t@h:port",
		"redis://u:sekr3t@h/-1",
		"redis://u:sekr3t@a,b",
		"redis://u:sek%zzr3t@h",
		"redis://u:sek/r3t@h",
		"redis://u:sek?r3t@h",
		"redis+sentinel://u:sekr3t@s?sentinel_password=sekr3t&nosuch=1",
		"redis+sentinel://s?sentinel_password=sekr3t&sentinel_password=sekr3t",
	} {
		_, err := parseURL(u)
		if !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("parseURL(%q) = %v; want ErrInvalid", u, err)
		}
		if strings.Contains(err.Error(), "sekr3t") || strings.Contains(err.Error(), "r3t") {
			t.Fatalf("parseURL(%q): error %q shows the password", u, err)
		}
	}
}

// TestOpenTLSOnPlainPort: rediss:// against a plain Redis port fails within
// about one dial timeout, saying why (go-redis alone retries the dial five
// times, 25 s with the default 5 s timeout).
func TestOpenTLSOnPlainPort(t *testing.T) {
	redistest.Need(t)
	ts := redistest.StartServer(t)
	start := time.Now()
	s, err := Open(ctxT(t), "rediss://"+ts.Addr()+"/0?dial_timeout=1s")
	if err == nil {
		_ = s.Close()
		t.Fatal("Open succeeded")
	}
	wantIs(t, err, store.ErrUnavailable, "Open(rediss:// on a plain port)")
	if !strings.Contains(err.Error(), "is the server speaking TLS?") {
		t.Fatalf("error %q does not say the server may not speak TLS", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("Open took %v; want about the 1 s dial timeout", d)
	}
}

// recorder is a slog handler that keeps the records it gets.
type recorder struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec)
	return nil
}
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorder) WithGroup(string) slog.Handler      { return r }

// TestGoRedisLogsToSlog: after Open, go-redis' pool messages about a server
// that went away arrive through log/slog at debug level, tagged
// component=go-redis, instead of go-redis' own lines on stderr.
func TestGoRedisLogsToSlog(t *testing.T) {
	redistest.Need(t)
	ts := redistest.StartServer(t)
	s := openURL(t, ts.URL()+"?dial_timeout=200ms")
	rec := &recorder{}
	old := slog.Default()
	slog.SetDefault(slog.New(rec))
	t.Cleanup(func() { slog.SetDefault(old) })
	ts.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := s.Snapshot(ctx, "g")
	wantIs(t, err, store.ErrUnavailable, "Snapshot with the server down")
	rec.mu.Lock()
	defer rec.mu.Unlock()
	found := false
	for _, r := range rec.recs {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "component" && a.Value.String() == "go-redis" {
				found = true
				if r.Level != slog.LevelDebug {
					t.Errorf("go-redis message %q at level %v; want debug", r.Message, r.Level)
				}
			}
			return true
		})
	}
	if !found {
		t.Fatalf("no go-redis message reached slog (got %d records)", len(rec.recs))
	}
}

func TestVersionAtLeast(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want bool
	}{
		{"7.0.15", true}, {"7.0", true}, {"7", true}, {"7.2.4", true}, {"8.0.1", true}, {"10.0.0", true},
		{"6.2.14", false}, {"5.0.7", false}, {"", false}, {"x.y", false}, {"6", false},
	} {
		if got := versionAtLeast(tc.v, MinServerVersion); got != tc.want {
			t.Errorf("versionAtLeast(%q, %q) = %v; want %v", tc.v, MinServerVersion, got, tc.want)
		}
	}
}

// TestOpenRESP2: Open's checks read HELLO's reply in RESP2 form too.
func TestOpenRESP2(t *testing.T) {
	redistest.Need(t)
	ts := redistest.StartServer(t)
	s := openURL(t, ts.URL()+"?protocol=2")
	if _, err := s.Snapshot(ctxT(t), "g"); err != nil {
		t.Fatal(err)
	}
}
