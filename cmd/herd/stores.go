package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"slices"
	"strings"

	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/memstore"
	"github.com/herdhq/herd/store/storeurl"
)

// storeURLsHelp describes the store URLs, for every command's help.
const storeURLsHelp = `Store URLs (--store, HERD_STORE):

  sqlite://PATH         an SQLite file shared by the processes of one host:
                        sqlite://herd.db (relative to the working directory),
                        sqlite:///var/lib/herd/herd.db
  redis://[:PASSWORD@]HOST:PORT[/DB][?prefix=herd]
                        Redis; rediss:// with TLS, redis+cluster://H1:P1,H2:P2,
                        redis+sentinel://H:P/MASTER
  postgres://USER@HOST/DB[?schema=herd]
                        PostgreSQL (postgresql:// too)
  etcd://HOST:PORT[,HOST:PORT...][?prefix=herd/]
                        an etcd cluster; etcds:// with TLS (?ca=&cert=&key=)
  mem://                this process's own store (herd demo and bench only)

Without --store, herd run, herd jobs and the commands that only read
(status, groups, partitions show) use ` + defaultRunStore + ` in the working
directory; the commands that only read open it read-only and never create
it. herd demo and herd bench use mem://. The commands that change or
delete a group's data (partitions set, group delete) have no default: give
--store.`

// storeFlagUsage is the --store flag's line in a command's flags.
const storeFlagUsage = "the store's URL: sqlite://PATH, redis://HOST:PORT, postgres://HOST/DB (see herd --help)"

// connector opens store handles for a store URL. For mem:// every handle
// shares one in-process store (closing a handle does not close it).
type connector struct {
	url      string
	scheme   string
	readOnly bool // open for reading only (storeurl.ReadOnly)
	mem      *memstore.Store
}

// newConnector checks the URL's scheme, and the whole of a mem:// URL. A
// networked store's URL is parsed by its backend at Open (a host list such
// as redis+cluster://a:7000,b is not a URL net/url accepts), which reports
// what is wrong without the password.
func newConnector(raw string) (*connector, error) {
	scheme, _, found := strings.Cut(raw, ":")
	if !found || scheme == "" || strings.ContainsAny(scheme, "/?#@") {
		return nil, withExit(exitUsage, fmt.Errorf("--store: no scheme; want mem://, or one of the schemes %s", supportedSchemes(false)))
	}
	c := &connector{url: raw, scheme: strings.ToLower(scheme)}
	if c.scheme != "mem" {
		if _, err := storeurl.Scheme(raw); err != nil {
			return nil, withExit(exitUsage, fmt.Errorf("--store: unknown scheme %q (supported: %s)", scheme, supportedSchemes(true)))
		}
		return c, nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the URL, password included
		}
		return nil, withExit(exitUsage, fmt.Errorf("--store: malformed URL (%v); write mem://", err))
	}
	if u.Opaque != "" || u.User != nil || u.Host != "" || u.Path != "" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		// The URL is not echoed: a password typed after a '#' or a '/' is
		// in the fragment or the path, where u.Redacted() would show it.
		return nil, withExit(exitUsage, errors.New("--store: the in-process store takes no host, path or query; write mem://"))
	}
	c.mem = memstore.New()
	return c, nil
}

// supportedSchemes lists the schemes (mem first if withMem).
func supportedSchemes(withMem bool) string {
	s := storeurl.Schemes()
	if !withMem {
		s = s[1:]
	}
	return strings.Join(s, ", ")
}

// name is the store's kind for reports (mem, redis, ...).
func (c *connector) name() string { return c.scheme }

func (c *connector) connect(ctx context.Context) (store.Store, error) {
	if c.mem != nil {
		return sharedStore{c.mem}, nil
	}
	var opts []storeurl.Option
	if c.readOnly {
		opts = append(opts, storeurl.ReadOnly())
	}
	return storeurl.Open(ctx, c.url, opts...)
}

// sharedStore is a handle on the in-process store shared by several
// members (and what else it offers, store.GroupLister).
type sharedStore struct{ *memstore.Store }

func (sharedStore) Close() error { return nil }

// readConnector is storeConnector for the commands that only read: the
// store is opened read-only (an SQLite file is neither created nor
// written).
func readConnector(url string) (*connector, error) {
	conn, err := storeConnector(url)
	if err != nil {
		return nil, err
	}
	conn.readOnly = true
	return conn, nil
}

// connectErr is the error of a failed connect to url: a file that does not
// exist (a read-only open creates none) exits with exitNotFound, and the
// message says when the URL was the default one.
func connectErr(err error, url string) error {
	if errors.Is(err, fs.ErrNotExist) {
		if url == defaultRunStore {
			err = fmt.Errorf("%w (the default store, %s; give --store or HERD_STORE)", err, defaultRunStore)
		}
		return withExit(exitNotFound, err)
	}
	return err
}

// redactErr is err with the secrets replaced, keeping its exit status.
func redactErr(err error, secrets []string) error {
	if err == nil {
		return nil
	}
	return withExit(exitCode(err), errors.New(redact(err.Error(), secrets)))
}

// checkGroupExists fails with exitNotFound if the store holds nothing for
// group (no session, partition set, record or log), for a store that can
// list its groups; a store that cannot is not checked.
func checkGroupExists(ctx context.Context, st store.Store, group string) error {
	gl, ok := st.(store.GroupLister)
	if !ok {
		return nil
	}
	gs, err := gl.Groups(ctx)
	if err != nil {
		return fmt.Errorf("listing the groups: %w", err)
	}
	if slices.Contains(gs, group) {
		return nil
	}
	known := "it holds no group"
	switch {
	case len(gs) > 5:
		known = fmt.Sprintf("it holds %d groups: herd groups lists them", len(gs))
	case len(gs) > 0:
		known = "its groups: " + strings.Join(gs, ", ")
	}
	return withExit(exitNotFound, fmt.Errorf("group %q not found in the store (%s)", group, known))
}
