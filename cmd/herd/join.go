package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/store"
)

// memberFlags are the flags herd run and herd jobs share about joining.
type memberFlags struct {
	joinTimeout time.Duration // --join-timeout
	replace     bool          // --replace-partitions / --replace-keys
	tie         string        // --tie-session: auto, on or off
}

// add registers the flags; noun is "partitions" or "keys".
func (m *memberFlags) add(f *pflag.FlagSet, noun string) {
	f.DurationVar(&m.joinTimeout, "join-timeout", herd.DefaultJoinTimeout,
		"how long to retry a store that is unreachable or does not answer before giving up (exit status 4), 1ms to 24h")
	f.BoolVar(&m.replace, "replace-"+noun, false,
		"replace the group's stored "+noun+" by --"+noun+" (without it the stored ones win: a member given others joins on them and warns)")
	f.StringVar(&m.tie, "tie-session", "auto",
		"tie the member's session to a lock of its process, so that a member killed is taken over within a fraction of a second instead of after --ttl (docs/takeover.md): auto or on (SQLite and PostgreSQL; other stores keep the TTL), or off (no tie: needed behind a transaction-mode pooler such as PgBouncer's pool_mode=transaction)")
}

// tieSession is whether the member ties its session on the store of
// scheme: auto and on tie on SQLite (a lock of the process on the host's
// file system) and PostgreSQL (an advisory lock of a connection of the
// member's own, which it watches: a server ending it while the member
// lives fences the member before the grace ends); on also passes the
// request to other stores, which keep the TTL.
func (m *memberFlags) tieSession(scheme string) bool {
	switch m.tie {
	case "on":
		return true
	case "auto":
		return scheme == "sqlite" || scheme == "postgres" || scheme == "postgresql"
	}
	return false
}

// check reports a --join-timeout out of bounds.
func (m *memberFlags) check() error {
	if m.joinTimeout < time.Millisecond || m.joinTimeout > 24*time.Hour {
		return withExit(exitUsage, fmt.Errorf("--join-timeout %v: want 1ms to 24h", m.joinTimeout))
	}
	return checkTie(m.tie)
}

// checkTie reports a --tie-session value other than auto, on and off.
func checkTie(tie string) error {
	switch tie {
	case "auto", "on", "off", "":
		return nil
	}
	return withExit(exitUsage, fmt.Errorf("--tie-session %q: want auto, on or off", tie))
}

// connectMember opens a member's store: it says where it connects, and
// retries a store that is unavailable, as Join does, until --join-timeout.
// It returns the store and what is left of the join timeout, for Join.
func connectMember(ctx context.Context, conn *connector, m memberFlags, log *slog.Logger) (store.Store, time.Duration, error) {
	if err := m.check(); err != nil {
		return nil, 0, err
	}
	log.Info("connecting to " + redactURL(conn.url))
	start := time.Now()
	jctx, cancel := context.WithTimeout(ctx, m.joinTimeout)
	defer cancel()
	var st store.Store
	err := herd.RetryUnavailable(jctx, log, "open the store", func(ctx context.Context) error {
		var err error
		st, err = conn.connect(ctx)
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	return st, max(m.joinTimeout-time.Since(start), time.Millisecond), nil
}

// redactURL is a store URL fit for a log line: no password, in the user
// part or in the query.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		// Not a URL net/url reads (a host list): drop the user part.
		scheme, rest, ok := strings.Cut(raw, "://")
		if at := strings.LastIndex(rest, "@"); ok && at >= 0 {
			return scheme + "://xxxxx@" + rest[at+1:]
		}
		return raw
	}
	q := u.Query()
	for k := range q {
		if strings.Contains(strings.ToLower(k), "pass") {
			q.Set(k, "xxxxx")
			u.RawQuery = q.Encode()
		}
	}
	return u.Redacted()
}
