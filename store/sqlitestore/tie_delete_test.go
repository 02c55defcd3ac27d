package sqlitestore_test

import (
	"os"
	"path/filepath"
	"testing"
)

// Deleting a group removes its ties' lock files with its rows, those of
// ended sessions and of live ones (force) alike.
func TestTieFilesGoWithGroup(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "herd.db")
	s := open(t, path)
	const group = "g"
	a, tieA := tied(ctx, t, s, group, "a")
	b, _ := tied(ctx, t, s, group, "b")
	_ = tieA.Close()
	if err := s.CloseSession(ctx, group, a); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteGroup(ctx, group, true); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(path + "-herd-ties")
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("lock file %s left after its group was deleted (sessions %s, %s)", e.Name(), a, b)
	}
}
