package redisstore

import (
	"context"
	"encoding/base64"
	"slices"
	"strings"

	"github.com/herdhq/herd/store"
)

var _ store.GroupLister = (*Store)(nil)

// groupKeyNames are the last parts of the keys a group may have (every
// version of this store wrote some of them).
var groupKeyNames = []string{"sessions", "members", "partitions", "partset", "partlist", "setinfo", "owners", "checkpoints", "epochat", "ckptat", "log", "version"}

// Groups implements store.GroupLister. It walks the keyspace with SCAN
// (MATCH "<prefix>:{*}:*", COUNT 1000, so each call holds the server for
// about as long as an HGETALL of 1,000 fields; never KEYS), on every primary
// of a Redis Cluster, and lists the groups whose key names decode: the
// hash tag an unpadded base64url of a valid group id, the last part one of
// the names the store writes. Walking the keyspace costs one call per
// 1,000 keys of the database (of every prefix), so it is a command for an
// operator, not for a loop.
func (s *Store) Groups(ctx context.Context) ([]string, error) {
	if err := s.begin(ctx, "Groups", nil); err != nil {
		return nil, err
	}
	keys, err := s.scanKeys(ctx, globEscape(s.prefix)+":{*}:*")
	if err != nil {
		return nil, fail("Groups", err)
	}
	seen := map[string]bool{}
	for _, k := range keys {
		if g, ok := s.groupOfKey(k); ok {
			seen[g] = true
		}
	}
	out := make([]string, 0, len(seen))
	for g := range seen {
		out = append(out, g)
	}
	slices.Sort(out)
	return out, nil
}

// groupOfKey returns the group whose key key is, if it is one.
func (s *Store) groupOfKey(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, s.prefix+":{")
	if !ok {
		return "", false
	}
	tag, name, ok := strings.Cut(rest, "}:")
	if !ok || !slices.Contains(groupKeyNames, name) {
		return "", false
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(tag)
	if err != nil {
		return "", false
	}
	g := string(b)
	if store.ValidateID("group", g) != nil || s.keys(g).sessions != s.prefix+":{"+tag+"}:sessions" {
		return "", false // not the canonical encoding of a valid id
	}
	return g, true
}
