package redisstore

import (
	"fmt"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Scope implements store.Scoped: the server (or the cluster's
// seed addresses), the database and the key prefix, never a password. Two
// Stores with the same scope reach the same groups, whatever their
// connections; herd lets the members of a group in one process that share
// a scope take turns (see herd's follow.go).
func (s *Store) Scope() string {
	switch c := s.client.(type) {
	case *redis.Client:
		o := c.Options()
		return fmt.Sprintf("redis %s %s/%d %s", o.Network, o.Addr, o.DB, s.prefix)
	case *redis.ClusterClient:
		addrs := slices.Clone(c.Options().Addrs)
		slices.Sort(addrs)
		return fmt.Sprintf("redis-cluster %s %s", strings.Join(addrs, ","), s.prefix)
	}
	return fmt.Sprintf("redis %p %s", s.client, s.prefix)
}
