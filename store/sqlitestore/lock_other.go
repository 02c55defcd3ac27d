//go:build !unix

package sqlitestore

import "context"

// Outside Unix, writers of different processes meet at SQLite's lock only.
func (s *Store) lockWriter(context.Context, *dbFile, string) (bool, error) { return false, nil }
func (s *Store) unlockWriter(*dbFile)                                      {}
