package sqlitestore_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/sqlitestore"
)

// Open refuses a network file system, told by statfs (Linux).
func TestOpenNetworkFileSystem(t *testing.T) {
	restore := sqlitestore.SetFSType(0x6969) // NFS_SUPER_MAGIC
	defer restore()
	dir := t.TempDir()
	wantOpenErr(t, "sqlite://"+dir+"/herd.db", store.ErrInvalid, "is on a network file system (NFS)", "network_fs=allow")
	if _, err := os.Stat(filepath.Join(dir, "herd.db")); !os.IsNotExist(err) {
		t.Errorf("a refused Open created the file (%v)", err)
	}
	s, err := sqlitestore.Open(t.Context(), "sqlite://"+dir+"/herd.db?network_fs=allow")
	if err != nil {
		t.Fatalf("Open with network_fs=allow: %v", err)
	}
	s.Close()
	restore()
	restore = sqlitestore.SetFSType(0xff534d42) // CIFS
	wantOpenErr(t, "sqlite://"+dir+"/herd.db", store.ErrInvalid, "(CIFS)")
}
