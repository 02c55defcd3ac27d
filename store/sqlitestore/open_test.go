package sqlitestore_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/sqlitestore"
)

// openErr opens rawURL and returns the error, failing the test if there
// is none.
func openErr(t *testing.T, rawURL string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := sqlitestore.Open(ctx, rawURL)
	if err == nil {
		s.Close()
		t.Fatalf("Open(%q) succeeded; want an error", rawURL)
	}
	return err
}

// wantOpenErr checks that Open(rawURL) fails with an error wrapping
// sentinel and containing every one of parts.
func wantOpenErr(t *testing.T, rawURL string, sentinel error, parts ...string) {
	t.Helper()
	err := openErr(t, rawURL)
	t.Logf("Open(%q): %v", rawURL, err)
	if !errors.Is(err, sentinel) {
		t.Errorf("Open(%q): %v; want it to wrap %v", rawURL, err, sentinel)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("Open(%q): %q; want it to say %q", rawURL, err, p)
		}
	}
}

// rawDB opens path with the driver itself, to write what herd would not.
func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func exec1(t *testing.T, db *sql.DB, query string, args ...any) {
	t.Helper()
	if _, err := db.Exec(query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

func TestOpenRejectsURLs(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"sqlite:herd.db", "two slashes"},
		{"sqlite:/abs/herd.db", "two slashes"},
		{"redis://x", "want sqlite://PATH"},
		{"sqlite://", "no path"},
		{"sqlite://?network_fs=allow", "no path"},
		{"sqlite://:memory:", "in-memory"},
		{"sqlite://file:x.db", "in-memory or file: URI"},
		{"sqlite://~/herd.db", "'~' is not expanded"},
		{"sqlite://a%zz.db", "not validly percent-encoded"},
		{"sqlite://a#b.db", "'#' in the path must be written %23"},
		{"sqlite://x.db?network_fs=maybe", "network_fs must be allow or refuse"},
		{"sqlite://x.db?cache=shared", `unknown parameter "cache"`},
		{"sqlite://x%00.db", "NUL"},
	} {
		wantOpenErr(t, tc.url, store.ErrInvalid, tc.want)
	}
}

func TestOpenPaths(t *testing.T) {
	dir := t.TempDir()
	// Relative to the working directory at Open.
	t.Chdir(dir)
	s := open(t, "rel.db")
	if want := filepath.Join(dir, "rel.db"); s.Path() != want {
		t.Errorf("Path() = %q; want %q", s.Path(), want)
	}
	if _, err := os.Stat(filepath.Join(dir, "rel.db-wal")); err != nil {
		t.Errorf("no -wal file next to the database (WAL mode): %v", err)
	}
	// Absolute, with characters a URL must escape.
	name := filepath.Join(dir, "a b?c%d#e.db")
	ctx := t.Context()
	s2, err := sqlitestore.Open(ctx, "sqlite://"+strings.NewReplacer("%", "%25", "?", "%3F", "#", "%23", " ", "%20").Replace(name))
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if s2.Path() != name {
		t.Errorf("Path() = %q; want %q", s2.Path(), name)
	}
	if _, err := s2.OpenSession(ctx, "g", "m", 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(name); err != nil {
		t.Errorf("the database is not at %q: %v", name, err)
	}
}

func TestOpenMissingDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "missing")
	wantOpenErr(t, "sqlite://"+dir+"/herd.db", store.ErrUnavailable, "directory "+dir+" does not exist; create it first")
}

func TestOpenDirectory(t *testing.T) {
	dir := t.TempDir()
	wantOpenErr(t, "sqlite://"+dir, store.ErrUnavailable, "is a directory")
}

// readOnly makes path (a file or directory) unwritable for this process,
// even as root (chattr +i), until the test ends; it skips the test if it
// cannot.
func readOnly(t *testing.T, path string) {
	t.Helper()
	if os.Geteuid() != 0 {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, st.Mode().Perm()&^0o222); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(path, st.Mode().Perm()) })
		return
	}
	if out, err := exec.Command("chattr", "+i", path).CombinedOutput(); err != nil {
		t.Skipf("running as root and chattr +i failed (%v: %s): cannot make %s read-only", err, out, path)
	}
	t.Cleanup(func() { exec.Command("chattr", "-i", path).Run() })
}

func TestOpenCannotCreate(t *testing.T) {
	dir := t.TempDir()
	readOnly(t, dir)
	wantOpenErr(t, "sqlite://"+dir+"/herd.db", store.ErrUnavailable, "cannot create "+dir+"/herd.db", "directory this user can write to")
}

func TestOpenReadOnlyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "herd.db")
	s := open(t, path)
	if _, err := s.OpenSession(t.Context(), "g", "m", 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	s.Close()
	readOnly(t, path)
	wantOpenErr(t, "sqlite://"+path, store.ErrUnavailable, "cannot open "+path+" for writing", "make it writable")
}

func TestOpenReadOnlyDirectory(t *testing.T) {
	// The file is writable but SQLite could not create its -wal file.
	dir := t.TempDir()
	path := filepath.Join(dir, "herd.db")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	readOnly(t, dir)
	wantOpenErr(t, "sqlite://"+path, store.ErrUnavailable, "directory "+dir+" is not writable", "-wal")
}

func TestOpenNotSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(path, []byte("shopping list: eggs, milk\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wantOpenErr(t, "sqlite://"+path, store.ErrCorrupt, "is not an SQLite database", `begins with "shopping list: e"`)
	got, _ := os.ReadFile(path)
	if string(got) != "shopping list: eggs, milk\n" {
		t.Errorf("Open changed the text file to %q", got)
	}
	short := filepath.Join(t.TempDir(), "short")
	if err := os.WriteFile(short, []byte("SQL"), 0o644); err != nil {
		t.Fatal(err)
	}
	wantOpenErr(t, "sqlite://"+short, store.ErrCorrupt, "is not an SQLite database")
}

func TestOpenOtherApplication(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	db := rawDB(t, path)
	exec1(t, db, "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
	exec1(t, db, "CREATE TABLE orders (id INTEGER PRIMARY KEY)")
	db.Close()
	wantOpenErr(t, "sqlite://"+path, store.ErrCorrupt, "SQLite database of another application", "customers, orders", "give herd a file of its own")
	// Nothing was added to it.
	db = rawDB(t, path)
	var n int
	if err := db.QueryRow("SELECT count(*) FROM sqlite_schema WHERE name LIKE 'herd%'").Scan(&n); err != nil || n != 0 {
		t.Errorf("herd tables in the other application's database: %d, %v", n, err)
	}
	// An application id of its own, and no tables.
	path2 := filepath.Join(t.TempDir(), "app2.db")
	db2 := rawDB(t, path2)
	exec1(t, db2, "PRAGMA application_id = 1234")
	db2.Close()
	wantOpenErr(t, "sqlite://"+path2, store.ErrCorrupt, "application_id 0x4d2")
}

func TestOpenNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "herd.db")
	open(t, path).Close()
	db := rawDB(t, path)
	exec1(t, db, "PRAGMA user_version = 99")
	db.Close()
	wantOpenErr(t, "sqlite://"+path, store.ErrCorrupt, "schema version 99, newer than this herd's 1", "upgrade this one")
}

func TestOpenDamagedSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "herd.db")
	open(t, path).Close()
	db := rawDB(t, path)
	exec1(t, db, "DROP TABLE herd_log")
	db.Close()
	wantOpenErr(t, "sqlite://"+path, store.ErrCorrupt, "missing the tables herd_log")
}

// Processes opening a new file at once create the schema once.
func TestOpenNewFileConcurrently(t *testing.T) {
	path := filepath.Join(t.TempDir(), "herd.db")
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			s, err := sqlitestore.Open(t.Context(), "sqlite://"+path)
			if err == nil {
				_, err = s.OpenSession(t.Context(), "g", "m", 1, time.Minute)
				s.Close()
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	s := open(t, path)
	snap, err := s.Snapshot(t.Context(), "g")
	if err != nil || len(snap.Sessions) != 8 {
		t.Fatalf("after 8 concurrent opens: %d sessions, %v; want 8", len(snap.Sessions), err)
	}
}
