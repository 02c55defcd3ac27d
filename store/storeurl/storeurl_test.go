package storeurl_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/internal/etcdtest"
	"github.com/herdhq/herd/internal/pgtest"
	"github.com/herdhq/herd/internal/redistest"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/etcdstore"
	"github.com/herdhq/herd/store/memstore"
	"github.com/herdhq/herd/store/pgstore"
	"github.com/herdhq/herd/store/redisstore"
	"github.com/herdhq/herd/store/sqlitestore"
	"github.com/herdhq/herd/store/storeurl"
)

func TestMain(m *testing.M) { etcdtest.Main(m) }

// Open picks the backend by scheme, on the real servers, and the store it
// returns works.
func TestOpenPicksBackend(t *testing.T) {
	raw := redistest.Need(t)
	pgtest.Need(t)
	prefix := redistest.Prefix(t, raw, "storeurl")
	schema := pgtest.Schema(t)
	sqlitePath := filepath.Join(t.TempDir(), "herd.db")
	etcdURL := etcdtest.Need(t) + "?prefix=" + fmt.Sprintf("herdtest-storeurl/%016x/", rand.Uint64())
	for _, tc := range []struct {
		url  string
		want func(store.Store) bool
	}{
		{"mem://", func(s store.Store) bool { _, ok := s.(*memstore.Store); return ok }},
		{"sqlite://" + sqlitePath, func(s store.Store) bool { _, ok := s.(*sqlitestore.Store); return ok }},
		{"SQLite://" + sqlitePath, func(s store.Store) bool { _, ok := s.(*sqlitestore.Store); return ok }},
		{redistest.URL() + "?prefix=" + prefix, func(s store.Store) bool { _, ok := s.(*redisstore.Store); return ok }},
		{etcdURL, func(s store.Store) bool { _, ok := s.(*etcdstore.Store); return ok }},
		{pgtest.WithOptions(pgtest.URL(), "schema", schema), func(s store.Store) bool { _, ok := s.(*pgstore.Store); return ok }},
	} {
		t.Run(strings.SplitN(tc.url, ":", 2)[0], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			s, err := storeurl.Open(ctx, tc.url)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer s.Close()
			if !tc.want(s) {
				t.Fatalf("Open(%q) gave a %T", tc.url, s)
			}
			if _, err := s.SetPartitions(ctx, "g", store.PartitionSet{Partitions: []store.Partition{{ID: "a", Weight: 1}}}); err != nil {
				t.Fatal(err)
			}
			snap, err := s.Snapshot(ctx, "g")
			if err != nil || len(snap.Partitions) != 1 {
				t.Fatalf("Snapshot: %v, %v", snap.Partitions, err)
			}
			if err := s.DeleteGroup(ctx, "g", true); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A bad URL is store.ErrInvalid, with a message that lists the schemes and
// never shows the password; Open returns no store then (a nil interface).
func TestOpenRejects(t *testing.T) {
	for url, want := range map[string]string{
		"":                    "no scheme",
		"herd.db":             "no scheme",
		"ftp://u:secret@host": `unknown scheme "ftp" (supported: mem, etcd, etcds, postgres, postgresql, redis, redis+cluster, redis+sentinel, rediss, rediss+cluster, rediss+sentinel, sqlite)`,
		"mem://x":             "the in-process store takes no host, path or query",
		"mem://u:secret@":     "the in-process store takes no host, path or query",
		"sqlite:herd.db":      "want sqlite://PATH",
	} {
		s, err := storeurl.Open(t.Context(), url)
		if s != nil || !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "secret") {
			t.Errorf("Open(%q): %v, %v; want no store and store.ErrInvalid containing %q", url, s, err, want)
		}
	}
}

// Open with a nil context fails with ErrInvalid whatever the backend, the
// in-process one included, and does not panic.
func TestOpenNilContext(t *testing.T) {
	var nilCtx context.Context
	for _, url := range []string{"mem://", "sqlite://" + filepath.Join(t.TempDir(), "herd.db")} {
		s, err := storeurl.Open(nilCtx, url)
		if s != nil {
			_ = s.Close()
		}
		if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), "nil context") {
			t.Errorf("Open(nil context, %q): %v; want store.ErrInvalid saying the context is nil", url, err)
		}
	}
}

// ReadOnly opens an SQLite file without creating it.
func TestOpenReadOnly(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "nothere.db")
	s, err := storeurl.Open(t.Context(), "sqlite://"+missing, storeurl.ReadOnly())
	if s != nil || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("read-only Open of a missing file: %v, %v; want fs.ErrNotExist", s, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("read-only Open created %v", ents)
	}
}

// A first program: a store by its URL, a member of group "orders" that
// runs handle for each partition it owns, and a graceful leave.
func ExampleOpen() {
	ctx := context.Background()
	st, err := storeurl.Open(ctx, "mem://") // or sqlite://herd.db, redis://host:6379, postgres://host/db
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	m, err := herd.Join(ctx, st, herd.Config{Group: "orders", Partitions: herd.Numbered(4), Handler: handle,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	if err := m.Leave(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("joined and left")
	// Output: joined and left
}

// handle processes one partition until the member is asked to let it go.
func handle(c *herd.Claim) error {
	<-c.Context().Done()
	return nil
}
