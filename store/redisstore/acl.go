package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/herdhq/herd/store"
)

// neededCommands are the commands herd sends, directly or from its
// scripts, each with arguments of the shape herd gives it (its keys under
// prefix), so that ACL DRYRUN checks the key patterns too. docs/security.md
// lists the same commands as an ACL rule; TestTLSACL opens a store as a
// user with exactly that rule and runs the conformance suite.
func neededCommands(prefix string) [][]any {
	k := prefix + ":{acl-check}:key"
	return [][]any{
		{"EVALSHA", strings.Repeat("0", 40), "1", k}, // every operation's script
		{"EVAL", "return 1", "1", k},                 // the script's first run
		{"MULTI"}, {"EXEC"},                          // Snapshot's reads
		{"XREAD", "COUNT", "1", "STREAMS", k, "0-0"}, // Changes
		{"SCAN", "0", "MATCH", prefix + ":*", "COUNT", "1000"},
		{"TIME"},
		{"GET", k}, {"SET", k, "v"}, {"DEL", k}, {"EXISTS", k},
		{"HGET", k, "f"}, {"HGETALL", k}, {"HMGET", k, "f"}, {"HSET", k, "f", "v"}, {"HDEL", k, "f"},
		{"ZADD", k, "1", "m"}, {"ZRANGE", k, "0", "-1"}, {"ZRANGEBYSCORE", k, "0", "1"},
		{"ZREM", k, "m"}, {"ZSCORE", k, "m"},
		{"XADD", k, "*", "f", "v"},
	}
}

// checkACL asks the server, with ACL DRYRUN (Redis 7.0), whether the URL's
// user may run every command herd needs on the keys under prefix, so that a
// user without one fails at Open with an error naming it instead of at its
// first use. The check needs the user to be allowed ACL DRYRUN itself
// (+acl|dryrun); where it is not, or the server has no ACL DRYRUN (an older
// server, a managed one that hides ACL), Open goes on, and a missing
// permission fails at first use with the server's NOPERM message, which
// names the command. One pipeline: one round trip per server.
func checkACL(ctx context.Context, t *target, client redis.UniversalClient, prefix string) error {
	user := "default"
	switch t.kind {
	case cluster:
		user = orDefault(t.cluster.Username, user)
	case sentinel:
		user = orDefault(t.failover.Username, user)
	default:
		user = orDefault(t.single.Username, user)
	}
	if cc, ok := client.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			return dryRun(ctx, t, c, c.Options().Addr, user, prefix)
		})
	}
	return dryRun(ctx, t, client, "", user, prefix)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func dryRun(ctx context.Context, t *target, c redis.Cmdable, addr, user, prefix string) error {
	want := neededCommands(prefix)
	cmds := make([]*redis.Cmd, len(want))
	_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, args := range want {
			cmds[i] = p.Do(ctx, append([]any{"ACL", "DRYRUN", user}, args...)...)
		}
		return nil
	})
	var denied, why []string
	keys := false
	for i, cmd := range cmds {
		res, cerr := cmd.Text()
		var rerr redis.Error
		switch {
		case cerr != nil && errors.As(cerr, &rerr):
			// ACL DRYRUN itself refused or unknown: the server cannot be
			// asked; the commands' first use will say what is missing.
			return nil
		case cerr != nil:
			return connectErr(t, orDefault(addr, "the server"), cerr)
		case strings.Contains(res, "permissions to access"):
			keys = true
			why = append(why, res)
		case res != "OK":
			denied = append(denied, want[i][0].(string))
			why = append(why, res)
		}
	}
	where := ""
	if addr != "" {
		where = " on " + addr
	}
	switch {
	case keys:
		return fmt.Errorf("redisstore: the Redis user %q may not use the keys %s:*%s (the server says: %s): give it ~%s:* in its ACL rule, or open the store with the prefix its rule allows (see docs/security.md): %w",
			user, prefix, where, dedup(why)[0], prefix, store.ErrInvalid)
	case len(denied) > 0:
		return fmt.Errorf("redisstore: the Redis user %q may not run %s%s (the server says: %s): allow herd's commands to the user (see docs/security.md for the ACL rule): %w",
			user, strings.Join(denied, ", "), where, strings.Join(dedup(why), "; "), store.ErrInvalid)
	}
	return nil
}

func dedup(s []string) []string {
	var out []string
	for _, v := range s {
		if len(out) == 0 || out[len(out)-1] != v {
			out = append(out, v)
		}
	}
	return out
}
