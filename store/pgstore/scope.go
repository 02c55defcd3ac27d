package pgstore

import "fmt"

// Scope implements store.Scoped: the server, the database and the schema,
// never a password. Two Stores with the same scope reach the same groups.
func (s *Store) Scope() string {
	c := s.pool.Config().ConnConfig
	return fmt.Sprintf("postgres %s:%d/%s %s", c.Host, c.Port, c.Database, s.schema)
}
