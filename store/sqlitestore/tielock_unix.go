//go:build unix

package sqlitestore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// tieLocksSupported reports whether this system has the locks ties use.
const tieLocksSupported = true

// fileKey is a file's identity: its device and inode.
type fileKey struct{ dev, ino uint64 }

func keyOf(fi os.FileInfo) (fileKey, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileKey{}, false
	}
	return fileKey{dev: uint64(st.Dev), ino: uint64(st.Ino)}, true
}

// lockTieFile creates the lock file at path (in a directory it creates
// if needed, with mode's permissions) and takes its exclusive flock, held
// until the file is closed (or the process dies). The descriptor is
// close-on-exec: a child process (herd run's) never holds the lock.
func lockTieFile(path string, mode os.FileMode) (*os.File, fileKey, error) {
	if err := os.Mkdir(dirOf(path), 0o777); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fileKey{}, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return nil, fileKey{}, err
	}
	fail := func(err error) (*os.File, fileKey, error) {
		f.Close()
		os.Remove(path)
		return nil, fileKey{}, err
	}
	if err := flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return fail(fmt.Errorf("locking %s: %w", path, err))
	}
	fi, err := f.Stat()
	if err != nil {
		return fail(err)
	}
	k, ok := keyOf(fi)
	if !ok {
		return fail(fmt.Errorf("%s: no device and inode", path))
	}
	return f, k, nil
}

// openTie opens the lock file at path if it is the file k; nil if the
// path names no file or another one.
func openTie(path string, k fileKey) (*os.File, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if got, ok := keyOf(fi); err != nil || !ok || got != k {
		f.Close()
		return nil, err
	}
	return f, nil
}

// tieFree reports whether the lock file at path, if it is the file k, is
// locked by nobody: its holder closed it or died. A file missing or
// replaced is not free: nobody can tell, and the session keeps its TTL.
func tieFree(path string, k fileKey) (bool, error) {
	f, err := openTie(path, k)
	if f == nil || err != nil {
		return false, err
	}
	defer f.Close()
	switch err := flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); {
	case err == nil:
		_ = flock(int(f.Fd()), unix.LOCK_UN)
		return true, nil
	case errors.Is(err, unix.EWOULDBLOCK):
		return false, nil
	default:
		return false, err
	}
}

// awaitTieFree blocks until the lock file at path, if it is the file k,
// is locked by nobody, and reports true then; false at once if the path
// names no file or another one. It cannot be cancelled: a flock wait is
// restarted after a signal.
func awaitTieFree(path string, k fileKey) (bool, error) {
	f, err := openTie(path, k)
	if f == nil || err != nil {
		return false, err
	}
	defer f.Close()
	if err := flock(int(f.Fd()), unix.LOCK_SH); err != nil {
		return false, err
	}
	return true, flock(int(f.Fd()), unix.LOCK_UN)
}

// sameFile reports whether path still names the open file f.
func sameFile(path string, f *os.File) bool {
	a, err := os.Stat(path)
	if err != nil {
		return false
	}
	b, err := f.Stat()
	return err == nil && os.SameFile(a, b)
}
