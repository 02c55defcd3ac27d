// Package storeurl opens a herd store from a URL, picking the backend by
// the URL's scheme, so that a program (or a flag) names its store in one
// string:
//
//	st, err := storeurl.Open(ctx, "sqlite://herd.db")
//	if err != nil { ... }
//	m, err := herd.Join(ctx, st, herd.Config{Group: "orders", Handler: handle})
//
// The schemes, and the package that reads the rest of the URL:
//
//	sqlite://PATH                    a database file shared by the processes of one
//	                                 host (sqlitestore): sqlite://herd.db, sqlite:///var/lib/herd/herd.db
//	redis://[:PASSWORD@]HOST:PORT[/DB][?prefix=herd]
//	rediss://...                     Redis, rediss with TLS (redisstore); also
//	redis+cluster://H1:P1,H2:P2      a Redis Cluster, and
//	redis+sentinel://H:P/MASTER      a primary found through Sentinel (and rediss+...)
//	postgres://USER@HOST/DB[?schema=herd]
//	postgresql://...                 PostgreSQL (pgstore)
//	etcd://HOST:PORT[,HOST:PORT...][?prefix=herd/]
//	etcds://...[?ca=&cert=&key=]     an etcd cluster, etcds with TLS (etcdstore)
//	mem://                           an in-process store (memstore), new at every
//	                                 Open: for tests and demos, one process only
//
// Every backend package stays importable on its own, with options of its
// own; this package only picks one. Open returns the backend's errors
// (a malformed URL wraps store.ErrInvalid, a server that cannot be reached
// store.ErrUnavailable), which never show the URL's password.
package storeurl

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/etcdstore"
	"github.com/herdhq/herd/store/memstore"
	"github.com/herdhq/herd/store/pgstore"
	"github.com/herdhq/herd/store/redisstore"
	"github.com/herdhq/herd/store/sqlitestore"
)

// Option changes how Open opens a store.
type Option func(*options)

type options struct {
	readOnly bool
}

// ReadOnly opens the store for a tool that only reads it (herd status):
// an SQLite file is opened read-only, so that Open creates no file and
// nothing is written to it (sqlitestore.WithReadOnly: a file that does not
// exist is an error wrapping fs.ErrNotExist), and a PostgreSQL store
// creates and upgrades no schema (pgstore.WithReadOnly: a schema without
// herd's tables is an error wrapping fs.ErrNotExist). Calls that write
// fail. Redis opens as usual.
func ReadOnly() Option {
	return func(o *options) { o.readOnly = true }
}

// openers maps each scheme but mem to its backend's Open.
var openers = map[string]func(ctx context.Context, url string, o options) (store.Store, error){
	"sqlite":          openSQLite,
	"redis":           openRedis,
	"rediss":          openRedis,
	"redis+cluster":   openRedis,
	"rediss+cluster":  openRedis,
	"redis+sentinel":  openRedis,
	"rediss+sentinel": openRedis,
	"postgres":        openPostgres,
	"postgresql":      openPostgres,
	"etcd":            openEtcd,
	"etcds":           openEtcd,
}

// Open opens the store rawURL names, picking the backend by the URL's
// scheme (see the package documentation). The caller closes the store.
func Open(ctx context.Context, rawURL string, opts ...Option) (store.Store, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	scheme, err := Scheme(rawURL)
	if err != nil {
		return nil, err
	}
	if ctx == nil { // as every backend's Open refuses it
		return nil, fmt.Errorf("storeurl: open: nil context (pass context.Background() or a call's own): %w", store.ErrInvalid)
	}
	if scheme == "mem" {
		if err := checkMem(rawURL); err != nil {
			return nil, err
		}
		return memstore.New(), nil
	}
	return openers[scheme](ctx, rawURL, o)
}

// Scheme returns the scheme of rawURL, in lower case, if Open knows it;
// else an error wrapping store.ErrInvalid that lists the schemes.
func Scheme(rawURL string) (string, error) {
	scheme, _, found := strings.Cut(rawURL, ":")
	if !found || scheme == "" || strings.ContainsAny(scheme, "/?#@") {
		return "", fmt.Errorf("storeurl: no scheme; want mem://, or one of the schemes %s: %w",
			strings.Join(Schemes()[1:], ", "), store.ErrInvalid)
	}
	s := strings.ToLower(scheme)
	if s != "mem" && openers[s] == nil {
		return "", fmt.Errorf("storeurl: unknown scheme %q (supported: %s): %w", scheme, strings.Join(Schemes(), ", "), store.ErrInvalid)
	}
	return s, nil
}

// Schemes lists the schemes Open knows: mem, then the others sorted.
func Schemes() []string {
	s := []string{"mem"}
	for k := range openers {
		s = append(s, k)
	}
	slices.Sort(s[1:])
	return s
}

// checkMem checks a mem:// URL: it has nothing after the scheme.
func checkMem(rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the URL, password included
		}
		return fmt.Errorf("storeurl: malformed URL (%v); write mem://: %w", err, store.ErrInvalid)
	}
	// Name the parts given, never their text: a password typed after a
	// '#' or a '/' is in the fragment or the path, not in u.User, and
	// u.Redacted() would echo it.
	var parts []string
	for _, p := range []struct {
		name  string
		given bool
	}{
		{"user info", u.User != nil}, {"host", u.Host != ""}, {"path", u.Opaque != "" || u.Path != ""},
		{"query", u.RawQuery != "" || u.ForceQuery}, {"fragment", u.Fragment != ""},
	} {
		if p.given {
			parts = append(parts, p.name)
		}
	}
	if len(parts) > 0 {
		return fmt.Errorf("storeurl: the in-process store takes no host, path or query (this URL has a %s); write mem://: %w",
			strings.Join(parts, ", "), store.ErrInvalid)
	}
	return nil
}

func openSQLite(ctx context.Context, url string, o options) (store.Store, error) {
	var opts []sqlitestore.Option
	if o.readOnly {
		opts = append(opts, sqlitestore.WithReadOnly())
	}
	s, err := sqlitestore.Open(ctx, url, opts...)
	if err != nil {
		return nil, err // not a nil *Store in a non-nil interface
	}
	return s, nil
}

func openRedis(ctx context.Context, url string, _ options) (store.Store, error) {
	s, err := redisstore.Open(ctx, url)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func openPostgres(ctx context.Context, url string, o options) (store.Store, error) {
	var opts []pgstore.Option
	if o.readOnly {
		opts = append(opts, pgstore.WithReadOnly())
	}
	s, err := pgstore.Open(ctx, url, opts...)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func openEtcd(ctx context.Context, url string, _ options) (store.Store, error) {
	s, err := etcdstore.Open(ctx, url)
	if err != nil {
		return nil, err
	}
	return s, nil
}
