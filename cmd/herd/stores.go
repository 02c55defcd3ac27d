package main

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/memstore"
	"github.com/herdhq/herd/store/redisstore"
)

// connector opens store handles for a store URL. For mem:// every handle
// shares one in-process store (closing a handle does not close it).
type connector struct {
	url    string
	scheme string
	mem    *memstore.Store
}

func newConnector(raw string) (*connector, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return nil, fmt.Errorf("store URL %q: want mem://, redis://host:port or rediss://host:port", raw)
	}
	c := &connector{url: raw, scheme: strings.ToLower(u.Scheme)}
	switch c.scheme {
	case "mem":
		c.mem = memstore.New()
	default:
		if open := openers[c.scheme]; open == nil {
			return nil, fmt.Errorf("store URL %q: unknown scheme %q (supported: %s)", raw, u.Scheme, supportedSchemes())
		}
	}
	return c, nil
}

// openers maps URL schemes of networked stores to their Open functions.
var openers = map[string]func(ctx context.Context, url string) (store.Store, error){
	"redis":           openRedis,
	"rediss":          openRedis,
	"redis+cluster":   openRedis,
	"rediss+cluster":  openRedis,
	"redis+sentinel":  openRedis,
	"rediss+sentinel": openRedis,
}

func openRedis(ctx context.Context, url string) (store.Store, error) {
	return redisstore.Open(ctx, url)
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

// sharedStore is a handle on a store shared by several members.
type sharedStore struct{ store.Store }

func (sharedStore) Close() error { return nil }
