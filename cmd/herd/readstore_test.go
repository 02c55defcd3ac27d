package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/herdhq/herd/store/redisstore"
)

// dirState is what a read-only command must leave as it was: the names in
// dir, and the bytes and modification time of each file.
func dirState(t *testing.T, dir string) map[string]string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	st := map[string]string{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		st[e.Name()] = fi.ModTime().Format(time.RFC3339Nano) + " " + string(b)
	}
	return st
}

// sameState reports the files that differ between two dirStates.
func sameState(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	for name, b := range before {
		if a, ok := after[name]; !ok {
			t.Errorf("%s: %s was removed", what, name)
		} else if a != b {
			t.Errorf("%s: %s changed (bytes or modification time)", what, name)
		}
	}
	for name := range after {
		if _, ok := before[name]; !ok {
			t.Errorf("%s: %s was created", what, name)
		}
	}
}

// newSQLiteGroup writes group g's partition set 0-3 to dir/herd.db with
// the built binary (which closes the file, so its -wal and -shm go).
func newSQLiteGroup(t *testing.T, dir string) {
	t.Helper()
	if r := runHerdBin(t, dir, nil, "partitions", "set", "--store", "sqlite://herd.db", "--group", "g", "0-3"); r.code != 0 {
		t.Fatalf("partitions set: exit %d, %s", r.code, r.stderr)
	}
}

// The commands that read use herd run's default store (sqlite://herd.db in
// the working directory) without --store; the ones that change a group
// need --store and say so; the help of every command that takes --store
// describes the URLs of every backend.
func TestReadCommandsUseDefaultStore(t *testing.T) {
	dir := t.TempDir()
	newSQLiteGroup(t, dir)
	for _, args := range [][]string{
		{"status"},
		{"status", "--group", "g", "--json"},
		{"status", "--group", "g", "-o", "json"},
		{"groups"},
		{"partitions", "show", "--group", "g"},
	} {
		r := runHerdBin(t, dir, nil, args...)
		if r.code != 0 {
			t.Errorf("herd %q without --store: exit %d, %s", args, r.code, r.stderr)
		}
		if args[0] == "groups" && r.stdout != "g\n" || args[0] == "partitions" && r.stdout != "0-3\n" ||
			slices.Contains(args, "json") && !strings.HasPrefix(r.stdout, `{"store":"sqlite://herd.db"`) {
			t.Errorf("herd %q: printed %q", args, r.stdout)
		}
	}
	for _, args := range [][]string{
		{"partitions", "set", "--group", "g", "0-1"},
		{"group", "delete", "--group", "g"},
	} {
		r := runHerdBin(t, dir, nil, args...)
		if r.code == 0 || !strings.Contains(r.stderr, `required flag(s) "store" not set`) {
			t.Errorf("herd %q without --store: exit %d, %q; want --store required", args, r.code, r.stderr)
		}
		help := runHerdBin(t, dir, nil, append(args[:2:2], "--help")...)
		if !strings.Contains(help.stdout, "--store is required (no default)") {
			t.Errorf("herd %q --help does not say --store is required:\n%s", args[:2], help.stdout)
		}
	}
	root := runHerdBin(t, dir, nil, "--help")
	for _, want := range []string{"SQLite", "PostgreSQL", "Redis", "sqlite://PATH", "postgres://", "redis://", "rediss://"} {
		if !strings.Contains(root.stdout, want) {
			t.Errorf("herd --help does not name %q:\n%s", want, root.stdout)
		}
	}
	if strings.Contains(root.stdout, "Redis, or the in-process store") {
		t.Errorf("herd --help still describes only Redis")
	}
	for _, args := range [][]string{{"status"}, {"groups"}, {"partitions", "show"}, {"partitions", "set"}, {"group", "delete"}, {"run"}, {"jobs"}, {"demo"}, {"bench"}} {
		help := runHerdBin(t, dir, nil, append(args, "--help")...)
		if !strings.Contains(help.stdout, storeURLsHelp) {
			t.Errorf("herd %q --help lacks the description of the store URLs", args)
		}
	}
}

// The commands that only read create nothing: a store URL naming a file
// that does not exist is an error (exit status 5), and no file appears.
func TestReadCommandsCreateNothing(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"status", "--store", "sqlite://nothere.db"},
		{"status"},
		{"groups", "--store", "sqlite://nothere.db"},
		{"partitions", "show", "--store", "sqlite://nothere.db", "--group", "g"},
	} {
		r := runHerdBin(t, dir, nil, args...)
		if r.code != exitNotFound || !strings.Contains(r.stderr, "does not exist") {
			t.Errorf("herd %q: exit %d, %q; want exit %d and the file named as missing", args, r.code, r.stderr, exitNotFound)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Fatalf("herd %q created %v", args, ents)
		}
	}
}

// An operator inspects a database file they cannot write: every read-only
// command opens it read-only and writes nothing, not even the -wal, -shm or
// sidecar files. (Root ignores permission bits, so what is checked is that
// nothing was written, with the file made read-only as an operator's
// would be.)
func TestReadCommandsOnReadOnlyFile(t *testing.T) {
	dir := t.TempDir()
	newSQLiteGroup(t, dir)
	os.Remove(filepath.Join(dir, "herd.db-herd")) // the file copied alone
	if err := os.Chmod(filepath.Join(dir, "herd.db"), 0o444); err != nil {
		t.Fatal(err)
	}
	before := dirState(t, dir)
	for _, args := range [][]string{
		{"status"},
		{"status", "--group", "g", "--all", "--json"},
		{"status", "--jobs"},
		{"groups"},
		{"partitions", "show", "--group", "g"},
	} {
		args = append(args, "--store", "sqlite://herd.db")
		r := runHerdBin(t, dir, nil, args...)
		if r.code != 0 {
			t.Errorf("herd %q on a read-only file: exit %d, %s", args, r.code, r.stderr)
		}
		sameState(t, strings.Join(args, " "), before, dirState(t, dir))
	}
}

// An unknown group is an error with exit status 5: status --group and
// partitions show of a group the store does not hold, and group delete of
// one (which deletes nothing), on SQLite and Redis.
func TestUnknownGroupNotFound(t *testing.T) {
	dir := t.TempDir()
	newSQLiteGroup(t, dir)
	u, prefix, raw := redisURL(t)
	for _, storeURL := range []string{"sqlite://herd.db", u} {
		for _, args := range [][]string{
			{"status", "--store", storeURL, "--group", "nosuch"},
			{"partitions", "show", "--store", storeURL, "--group", "nosuch"},
			{"group", "delete", "--store", storeURL, "--group", "nosuch"},
		} {
			r := runHerdBin(t, dir, nil, args...)
			if r.code != exitNotFound || !strings.Contains(r.stderr, `group "nosuch" not found`) {
				t.Errorf("herd %q: exit %d, %q; want exit %d, group not found", args, r.code, r.stderr, exitNotFound)
			}
			if args[0] == "group" && strings.Contains(r.stdout, "deleted") {
				t.Errorf("herd %q says %q", args, r.stdout)
			}
		}
	}
	noKeys(t, raw, prefix)
}

// An error says each layer's part once: group delete refused for a live
// member (Redis) prints one "herd:", not "herd: herd: ... herd: group has
// live members", and exits with the "in use" status.
func TestGroupDeleteInUseSaysItOnce(t *testing.T) {
	u, prefix, raw := redisURL(t)
	st, err := redisstore.Open(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.OpenSession(t.Context(), "orders", "m1", 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	r := runHerdBin(t, "", nil, "group", "delete", "--store", u, "--group", "orders")
	if r.code != exitInUse || strings.Count(r.stderr, "herd:") != 1 || !strings.Contains(r.stderr, "group has live members") ||
		strings.Count(r.stderr, "elete") != 1 {
		t.Errorf("group delete with a live member: exit %d, %q; want exit %d and each part said once", r.code, r.stderr, exitInUse)
	}
	if r := runHerdBin(t, "", nil, "group", "delete", "--store", u, "--group", "orders", "--force"); r.code != 0 {
		t.Errorf("group delete --force: exit %d, %s", r.code, r.stderr)
	}
	noKeys(t, raw, prefix)
}
