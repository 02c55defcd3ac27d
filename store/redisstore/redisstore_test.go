package redisstore

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/herdhq/herd/internal/redistest"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/storetest"
)

func TestConformance(t *testing.T) {
	raw := redistest.Need(t)
	prefix := testPrefix(t, raw)
	storetest.Run(t, func(t *testing.T) store.Store {
		return openWithPrefix(t, prefix)
	})
}

// TestConformanceNew runs the suite on a store made by New with a client
// the caller owns (speaking RESP2, where Lua false arrives as nil rather
// than as a RESP3 boolean).
func TestConformanceNew(t *testing.T) {
	raw := redistest.Need(t)
	prefix := testPrefix(t, raw)
	opt, err := redis.ParseURL(redistest.URL())
	if err != nil {
		t.Fatal(err)
	}
	opt.Protocol = 2
	client := redis.NewClient(opt)
	t.Cleanup(func() { _ = client.Close() })
	storetest.Run(t, func(t *testing.T) store.Store {
		s := New(client, WithPrefix(prefix))
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestOpenBadURLs(t *testing.T) {
	ctx := ctxT(t)
	for _, u := range []string{
		"",
		"localhost:6379",
		"http://localhost:6379",
		"redis://local host:6379",
		"redis://localhost:port",
		"redis://localhost:6379/notadb",
		"redis://localhost:6379/0/1",
		"redis://localhost:6379?no_such_option=1",
		"redis://localhost:6379?prefix=",
		"redis://localhost:6379?prefix=a{b}",
		"redis://localhost:6379?prefix=a&prefix=b",
		"redis://u:sekr3t@localhost:6379?dial_timeout=forever",
		"redis://u:sekr3t@local host:6379",
		"redis://%zz",
		"::::",
		"\x00",
	} {
		s, err := Open(ctx, u)
		if err == nil {
			_ = s.Close()
			t.Fatalf("Open(%q) succeeded; want ErrInvalid", u)
		}
		wantIs(t, err, store.ErrInvalid, fmt.Sprintf("Open(%q)", u))
		if strings.Contains(err.Error(), "sekr3t") {
			t.Fatalf("Open(%q) error %q shows the password", u, err)
		}
	}
	s, err := Open(ctx, "redis://localhost:6379", WithPrefix("x}"))
	if err == nil {
		_ = s.Close()
	}
	wantIs(t, err, store.ErrInvalid, "Open with WithPrefix(\"x}\")")
}

func TestOpenUnreachable(t *testing.T) {
	ctx := ctxT(t)
	for _, u := range []string{
		"redis://u:sekr3t@127.0.0.1:1/0?dial_timeout=1s&max_retries=-1",
		"rediss://127.0.0.1:1/0?dial_timeout=1s&max_retries=-1",
	} {
		start := time.Now()
		s, err := Open(ctx, u)
		if err == nil {
			_ = s.Close()
			t.Fatalf("Open(%q) succeeded; want ErrUnavailable", u)
		}
		wantIs(t, err, store.ErrUnavailable, fmt.Sprintf("Open(%q)", u))
		if strings.Contains(err.Error(), "sekr3t") {
			t.Fatalf("Open(%q) error %q shows the password", u, err)
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("Open(%q) took %v", u, time.Since(start))
		}
	}
}

func TestOpenPrefixAndACL(t *testing.T) {
	raw := redistest.Need(t)
	ctx := ctxT(t)
	prefix := testPrefix(t, raw)

	// prefix from the URL, next to a go-redis option.
	u := redistest.URL()
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	s, err := Open(ctx, u+sep+"prefix="+prefix+"&dial_timeout=2s")
	must(t, err, "Open with ?prefix=")
	t.Cleanup(func() { _ = s.Close() })
	if s.prefix != prefix {
		t.Fatalf("prefix from URL = %q; want %q", s.prefix, prefix)
	}
	must(t, setErr(s.SetPartitions(ctx, "g", store.PartitionSet{Partitions: []store.Partition{{ID: "p"}}})), "SetPartitions")
	if n, _ := raw.Exists(ctx, s.keys("g").partitions).Result(); n != 1 || !strings.HasPrefix(s.keys("g").partitions, prefix+":{") {
		t.Fatalf("key %q not written", s.keys("g").partitions)
	}
	// WithPrefix wins over the URL.
	s2, err := Open(ctx, u+sep+"prefix=other", WithPrefix(prefix))
	must(t, err, "Open with ?prefix= and WithPrefix")
	defer s2.Close()
	if s2.prefix != prefix {
		t.Fatalf("prefix = %q; want WithPrefix's %q", s2.prefix, prefix)
	}

	// An ACL user limited to the prefix's keys.
	if !strings.HasPrefix(u, "redis://") || strings.Contains(u, "@") {
		t.Skip("ACL part needs a plain redis:// test URL without credentials")
	}
	user := "herdtest-user-" + redistest.RandomHex(4)
	pass := "p@ss:w/rd " + redistest.RandomHex(4)
	must(t, raw.Do(ctx, "ACL", "SETUSER", user, "on", ">"+pass, "~"+prefix+":*", "&*", "+@all", "-@dangerous", "+ping").Err(), "ACL SETUSER")
	t.Cleanup(func() { raw.Do(context.Background(), "ACL", "DELUSER", user) })
	host := strings.TrimPrefix(u, "redis://")
	authURL := "redis://" + user + ":" + urlEscape(pass) + "@" + host
	s3, err := Open(ctx, authURL, WithPrefix(prefix))
	must(t, err, "Open with ACL user")
	defer s3.Close()
	id, err := s3.OpenSession(ctx, "acl group", "m", 1, time.Minute)
	must(t, err, "OpenSession as ACL user")
	snap, err := s3.Snapshot(ctx, "acl group")
	must(t, err, "Snapshot as ACL user")
	_, err = store.Claim(ctx, s3, "acl group", "p", id)
	must(t, err, "Claim as ACL user")
	cs, _, err := s3.Changes(ctx, "acl group", snap.Version, 10)
	if err != nil || len(cs) != 1 || cs[0].Partition != "p" {
		t.Fatalf("Changes as ACL user: %+v, %v; want the claim of p", cs, err)
	}
	// The same user with another prefix is refused by the server.
	s4 := New(s3.client, WithPrefix("not-"+prefix))
	_, err = s4.OpenSession(ctx, "g", "m", 1, time.Minute)
	if err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("OpenSession outside the user's keys: %v; want a NOPERM error", err)
	}
	_, err = Open(ctx, "redis://"+user+":wrong@"+host)
	wantIs(t, err, store.ErrUnavailable, "Open with a wrong password")
	if strings.Contains(err.Error(), "wrong@") {
		t.Fatalf("error shows the password: %v", err)
	}
}

func urlEscape(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func TestNewBadPrefix(t *testing.T) {
	raw := redistest.Need(t)
	ctx := ctxT(t)
	for _, p := range []string{"", "a{", "}", "new\nline", strings.Repeat("x", 257)} {
		s := New(raw, WithPrefix(p))
		_, err := s.OpenSession(ctx, "g", "m", 1, time.Second)
		wantIs(t, err, store.ErrInvalid, fmt.Sprintf("OpenSession on a store with prefix %q", p))
		_, _, err = s.Changes(ctx, "g", store.Version{}, 1)
		wantIs(t, err, store.ErrInvalid, fmt.Sprintf("Changes on a store with prefix %q", p))
	}
	_, err := New(nil).Snapshot(ctx, "g")
	wantIs(t, err, store.ErrInvalid, "Snapshot on New(nil)")
}

// TestKeysShareHashTag: every key of a group, whatever its id, has the
// same Redis Cluster hash tag, and different groups different tags.
func TestKeysShareHashTag(t *testing.T) {
	s := New(redis.NewClient(&redis.Options{}), WithPrefix("pre:fix"))
	defer s.client.Close()
	tags := map[string]string{}
	for _, g := range []string{"g", "{g}", "}{", "{", "}", "a:b", "with space", "日本", "{}", strings.Repeat("{x}", 170)} {
		k := s.keys(g)
		var tag string
		for i, name := range []string{k.sessions, k.members, k.partitions, k.owners, k.checkpoints, k.epochat, k.ckptat, k.partset, k.partlist, k.log, k.version} {
			open := strings.IndexByte(name, '{')
			close := strings.IndexByte(name[open+1:], '}')
			if open < 0 || close <= 0 {
				t.Fatalf("key %q of group %q has no hash tag", name, g)
			}
			got := name[open+1 : open+1+close]
			if i == 0 {
				tag = got
			} else if got != tag {
				t.Fatalf("group %q: key %q has tag %q; want %q like the others", g, name, got, tag)
			}
			if strings.Count(name, "{") != 1 || strings.Count(name, "}") != 1 {
				t.Fatalf("key %q has more than one brace pair", name)
			}
		}
		if other, dup := tags[tag]; dup {
			t.Fatalf("groups %q and %q share tag %q", g, other, tag)
		}
		tags[tag] = g
	}
}
