package sqlitestore

// SetFSType replaces the statfs of Open's network file system check until
// the returned function is called.
func SetFSType(magic int64) (restore func()) {
	old := fsType
	fsType = func(string) (int64, error) { return magic, nil }
	return func() { fsType = old }
}
