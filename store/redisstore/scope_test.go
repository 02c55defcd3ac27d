package redisstore

import (
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

func TestScopeNamesServerAndPrefixNeverThePassword(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6390", DB: 3, Password: "s3cret-pass"})
	defer c.Close()
	a, b := New(c, WithPrefix("p1")), New(c, WithPrefix("p2"))
	other := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6390", DB: 3})
	defer other.Close()
	a2 := New(other, WithPrefix("p1"))
	if a.Scope() != a2.Scope() {
		t.Errorf("two clients of one server and prefix have scopes %q and %q; want one", a.Scope(), a2.Scope())
	}
	if a.Scope() == b.Scope() {
		t.Errorf("prefixes p1 and p2 have the same scope %q", a.Scope())
	}
	for _, s := range []*Store{a, b, a2} {
		if strings.Contains(s.Scope(), "s3cret") {
			t.Errorf("scope %q shows the password", s.Scope())
		}
	}
	db4 := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6390", DB: 4})
	defer db4.Close()
	if d := New(db4, WithPrefix("p1")); d.Scope() == a.Scope() {
		t.Errorf("databases 3 and 4 have the same scope %q", a.Scope())
	}
}
