package sqlitestore

import "time"

// Test hooks.

// WithPollOnly makes the store wake its readers by polling data_version
// every d, without inotify (for tests and the measurement of both).
func WithPollOnly(d time.Duration) Option {
	return func(c *config) { c.noInotify, c.pollInterval = true, d }
}

// Applied is how many snapshots the store made by applying the log to
// the records it kept.
func (s *Store) Applied() int64 { return s.cache.applied.Load() }

// WithPollInterval sets the backstop poll of data_version (inotify stays).
func WithPollInterval(d time.Duration) Option {
	return func(c *config) { c.pollInterval = d }
}

// TieWaits is how many lock files the store's ties wait on now.
func (s *Store) TieWaits() int {
	s.ties.mu.Lock()
	defer s.ties.mu.Unlock()
	return len(s.ties.waiting)
}
