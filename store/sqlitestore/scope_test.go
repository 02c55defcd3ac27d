package sqlitestore_test

import (
	"path/filepath"
	"testing"
)

func TestScopeNamesTheFile(t *testing.T) {
	dir := t.TempDir()
	a, b, c := open(t, filepath.Join(dir, "a.db")), open(t, filepath.Join(dir, "a.db")), open(t, filepath.Join(dir, "c.db"))
	if a.Scope() != b.Scope() {
		t.Errorf("two stores on one file have scopes %q and %q; want one", a.Scope(), b.Scope())
	}
	if a.Scope() == c.Scope() {
		t.Errorf("two files have the same scope %q", a.Scope())
	}
}
