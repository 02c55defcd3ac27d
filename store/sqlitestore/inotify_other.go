//go:build !linux

package sqlitestore

// walWatch is not available outside Linux: the notifier polls.
type walWatch struct{ events chan struct{} }

func watchWAL(string) *walWatch { return nil }
func (w *walWatch) ok() bool    { return false }
func (w *walWatch) rearm() bool { return false }
func (w *walWatch) close()      {}
