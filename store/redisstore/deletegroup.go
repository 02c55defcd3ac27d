package redisstore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/herdhq/herd/store"
)

// KEYS: sessions, then every other key of the group. ARGV: force ("1" or
// "0").
//
// The live sessions are read with pcall when forced, so that a group whose
// sessions key was overwritten by something else can still be deleted.
var deleteGroupScript = newScript(prelude + `
local sess, force = KEYS[1], ARGV[1] == '1'
local live = redis.pcall('ZRANGEBYSCORE', sess, '(' .. now_s, '+inf')
if type(live) ~= 'table' or live.err then
  if not force then return {'corrupt', sess, ''} end
  live = {}
end
if #live > 0 and not force then return {'inuse', tostring(#live)} end
for i = 1, #KEYS do redis.call('DEL', KEYS[i]) end
return {'ok'}
`)

// DeleteGroup implements store.Store. One script checks for live sessions
// and deletes the group's keys. The keys are the ones this version of the
// store writes plus any other key under the group's hash tag (found with
// SCAN before the script runs), so keys written by another version of herd
// under the same prefix are deleted too.
func (s *Store) DeleteGroup(ctx context.Context, group string, force bool) error {
	if err := s.begin(ctx, "DeleteGroup", store.ValidateGroup(group)); err != nil {
		return err
	}
	k := s.keys(group)
	ks := []string{k.sessions, k.members, k.partitions, k.owners, k.checkpoints, k.epochat, k.ckptat, k.partset, k.partlist, k.givenback, k.setinfo, k.loads, k.log, k.version}
	base := strings.TrimSuffix(k.sessions, "sessions")
	extra, err := s.scanKeys(ctx, globEscape(base)+"*")
	if err != nil {
		return fail("DeleteGroup", err)
	}
	for _, key := range extra {
		if !slices.Contains(ks, key) {
			ks = append(ks, key)
		}
	}
	f := "0"
	if force {
		f = "1"
	}
	status, res, err := s.run(ctx, "DeleteGroup", deleteGroupScript, ks, f)
	if err != nil {
		return err
	}
	switch status {
	case "ok":
		return nil
	case "inuse":
		n, _ := strconv.Atoi(str(res, 0))
		return fmt.Errorf("redisstore: DeleteGroup: %w", store.InUseError(group, n))
	}
	return unexpected("DeleteGroup", status)
}

// scanCount is the COUNT of each SCAN call: how many keys the server looks
// at per call, which bounds the time one call holds it.
const scanCount = 1000

// scanKeys lists the keys matching pattern, with SCAN (never KEYS), COUNT
// scanCount. On Redis Cluster every master is scanned (a group's keys share one slot, but which node holds it is the
// cluster's business).
func (s *Store) scanKeys(ctx context.Context, pattern string) ([]string, error) {
	var mu sync.Mutex
	var out []string
	scan := func(ctx context.Context, c redis.Cmdable) error {
		iter := c.Scan(ctx, 0, pattern, scanCount).Iterator()
		for iter.Next(ctx) {
			mu.Lock()
			out = append(out, iter.Val())
			mu.Unlock()
		}
		return iter.Err()
	}
	if cc, ok := s.client.(*redis.ClusterClient); ok {
		err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
		return out, err
	}
	return out, scan(ctx, s.client)
}

// globEscape quotes the characters SCAN's MATCH pattern treats specially.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
