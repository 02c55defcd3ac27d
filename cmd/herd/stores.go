package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/memstore"
	"github.com/herdhq/herd/store/pgstore"
	"github.com/herdhq/herd/store/redisstore"
	"github.com/herdhq/herd/store/sqlitestore"
)

// connector opens store handles for a store URL. For mem:// every handle
// shares one in-process store (closing a handle does not close it).
type connector struct {
	url    string
	scheme string
	mem    *memstore.Store
}

// newConnector checks the URL's scheme, and the whole of a mem:// URL. A
// networked store's URL is parsed by its backend at Open (a host list such
// as redis+cluster://a:7000,b is not a URL net/url accepts), which reports
// what is wrong without the password.
func newConnector(raw string) (*connector, error) {
	scheme, _, found := strings.Cut(raw, ":")
	if !found || scheme == "" || strings.ContainsAny(scheme, "/?#@") {
		return nil, fmt.Errorf("--store: no scheme; want mem://, or one of the schemes %s", supportedSchemes())
	}
	c := &connector{url: raw, scheme: strings.ToLower(scheme)}
	if c.scheme != "mem" {
		if open := openers[c.scheme]; open == nil {
			return nil, fmt.Errorf("--store: unknown scheme %q (supported: %s)", scheme, supportedSchemes())
		}
		return c, nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the URL, password included
		}
		return nil, fmt.Errorf("--store: malformed URL (%v); write mem://", err)
	}
	if u.Opaque != "" || u.User != nil || u.Host != "" || u.Path != "" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return nil, fmt.Errorf("--store %q: the in-process store takes no host, path or query; write mem://", u.Redacted())
	}
	c.mem = memstore.New()
	return c, nil
}

// openers maps URL schemes of stores outside this process (servers, or a
// file shared by the processes of one host) to their Open functions.
var openers = map[string]func(ctx context.Context, url string) (store.Store, error){
	"redis":           openRedis,
	"rediss":          openRedis,
	"redis+cluster":   openRedis,
	"rediss+cluster":  openRedis,
	"redis+sentinel":  openRedis,
	"rediss+sentinel": openRedis,
	"postgres":        openPostgres,
	"postgresql":      openPostgres,
	"sqlite":          openSQLite,
}

func openRedis(ctx context.Context, url string) (store.Store, error) {
	return redisstore.Open(ctx, url)
}

func openPostgres(ctx context.Context, url string) (store.Store, error) {
	return pgstore.Open(ctx, url)
}

func openSQLite(ctx context.Context, url string) (store.Store, error) {
	return sqlitestore.Open(ctx, url)
}

func supportedSchemes() string {
	s := []string{"mem"}
	for k := range openers {
		s = append(s, k)
	}
	slices.Sort(s[1:])
	return strings.Join(s, ", ")
}

// name is the store's kind for reports (mem, redis, ...).
func (c *connector) name() string { return c.scheme }

func (c *connector) connect(ctx context.Context) (store.Store, error) {
	if c.mem != nil {
		return sharedStore{c.mem}, nil
	}
	return openers[c.scheme](ctx, c.url)
}

// sharedStore is a handle on the in-process store shared by several
// members (and what else it offers, store.GroupLister).
type sharedStore struct{ *memstore.Store }

func (sharedStore) Close() error { return nil }
