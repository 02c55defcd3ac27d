//go:build !linux

package sqlitestore

// fileWatch is not available outside Linux: the notifier polls.
type fileWatch struct{ events chan struct{} }

func watchFile(string) *fileWatch { return nil }
func (w *fileWatch) ok() bool     { return false }
func (w *fileWatch) rearm() bool  { return false }
func (w *fileWatch) close()       {}
