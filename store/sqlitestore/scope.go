package sqlitestore

// Scope implements store.Scoped: the database file. Two Stores on the same
// file reach the same groups.
func (s *Store) Scope() string { return "sqlite " + s.path }
