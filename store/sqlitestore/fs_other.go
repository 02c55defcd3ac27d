//go:build !linux

package sqlitestore

// checkFileSystem cannot tell a network file system outside Linux.
func checkFileSystem(dir string, allow bool) error { return nil }

// checkDirWritable leaves the check to SQLite outside Linux.
func checkDirWritable(dir, path string) error { return nil }
