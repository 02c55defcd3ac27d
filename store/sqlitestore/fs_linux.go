package sqlitestore

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/herdhq/herd/store"
)

// networkFileSystems are the file systems, by statfs magic number, on which
// SQLite's locking and WAL mode's shared memory cannot be trusted: the
// file is reached through a network (or a cluster), so two processes may
// not see each other's locks, or a host other than this one may write the
// file. Open refuses them unless the URL says network_fs=allow.
var networkFileSystems = map[int64]string{
	0x6969:     "NFS",
	0x517b:     "SMB",
	0xff534d42: "CIFS",
	0xfe534d42: "SMB2",
	0x5346414f: "AFS",
	0x6b414653: "AFS",
	0x73757245: "Coda",
	0x00c36400: "Ceph",
	0x01021997: "9P",
	0x01161970: "GFS2",
	0x7461636f: "OCFS2",
	0x0bd00bd0: "Lustre",
}

// fsType returns the statfs magic number of the file system holding path
// (a variable so that tests can pretend to be on NFS).
var fsType = func(path string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, err
	}
	return int64(st.Type), nil
}

// checkFileSystem refuses a directory on a network file system.
func checkFileSystem(dir string, allow bool) error {
	t, err := fsType(dir)
	if err != nil {
		return fmt.Errorf("sqlitestore: statfs %s: %w: %w", dir, err, store.ErrUnavailable)
	}
	name, network := networkFileSystems[t]
	if !network || allow {
		return nil
	}
	return fmt.Errorf("sqlitestore: %s is on a network file system (%s): SQLite's locks and WAL shared memory "+
		"do not work across hosts there, so two members could own one partition; put the database on a local disk, "+
		"or add ?network_fs=allow if every process using it runs on this one host and you accept the risk: %w",
		dir, name, store.ErrInvalid)
}

// checkDirWritable checks that SQLite can create its -wal and -shm files
// next to path (unless they exist and are writable).
func checkDirWritable(dir, path string) error {
	ok := true
	for _, suffix := range []string{"-wal", "-shm"} {
		f, err := os.OpenFile(path+suffix, os.O_RDWR, 0)
		if err != nil {
			ok = false
			if !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("sqlitestore: cannot open %s for writing: %w: %w", path+suffix, unwrapPath(err), store.ErrUnavailable)
			}
			continue
		}
		f.Close()
	}
	if ok {
		return nil
	}
	if err := unix.Access(dir, unix.W_OK|unix.X_OK); err != nil {
		return fmt.Errorf("sqlitestore: directory %s is not writable (%w): SQLite creates %s-wal and %s-shm next to the database; "+
			"make the directory writable or move the database: %w", dir, err, path, path, store.ErrUnavailable)
	}
	return nil
}
