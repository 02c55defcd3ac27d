package etcdstore

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/herdhq/herd/store"
)

func TestParseURL(t *testing.T) {
	for raw, want := range map[string][]string{
		"etcd://127.0.0.1:2379":          {"http://127.0.0.1:2379"},
		"etcd://a:1,b:2,c":               {"http://a:1", "http://b:2", "http://c:2379"},
		"etcds://u:p@a:1/?prefix=x/":     {"https://a:1"},
		"ETCD://[::1]:2379?prefix=herd/": {"http://[::1]:2379"},
	} {
		cfg, _, err := parseURL(raw)
		if err != nil || !slices.Equal(cfg.Endpoints, want) {
			t.Errorf("parseURL(%q): %v, %v; want %v", raw, cfg.Endpoints, err, want)
		}
	}
	cfg, prefix, err := parseURL("etcds://user:s%40cret@h:1?prefix=p/")
	if err != nil || cfg.Username != "user" || cfg.Password != "s@cret" || prefix != "p/" || cfg.TLS == nil {
		t.Fatalf("parseURL with a user and TLS: %+v, %q, %v", cfg, prefix, err)
	}
	for _, raw := range []string{"", "etcd://", "redis://h:1", "etcd://h:x", "etcd://h:1/path", "etcd://h:1?nope=1",
		"etcd://h:1?ca=x", "etcds://h:1?cert=x", "etcd://u:pa?ss@h:1", "etcd://u:Sekr3t@h:99999"} {
		_, _, err := parseURL(raw)
		if !errors.Is(err, store.ErrInvalid) || strings.Contains(err.Error(), "Sekr3t") || strings.Contains(err.Error(), "pa") && strings.Contains(raw, "pa?") {
			t.Errorf("parseURL(%q): %v; want ErrInvalid without the password", raw, err)
		}
	}
}
