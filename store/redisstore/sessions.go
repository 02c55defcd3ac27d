package redisstore

// Sessions: open, renew, close.

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/herdhq/herd/store"
)

// OpenSession implements store.Store. A call that fails on the network or
// its deadline may have opened its session all the same (the server ran
// it, its reply was lost): the next OpenSession of the group closes it
// first (store.Ghosts).
func (s *Store) OpenSession(ctx context.Context, group, member string, weight int, ttl time.Duration) (string, error) {
	if err := s.begin(ctx, "OpenSession", store.ValidateOpenSession(group, member, weight, ttl)); err != nil {
		return "", err
	}
	k := s.keys(group)
	meta := strconv.Itoa(weight) + ":" + member
	return s.ghosts.OpenSession(group, ttl, "redisstore: OpenSession",
		func(id string) error {
			status, _, err := s.runLogged(ctx, "OpenSession (closing a session a failed call may have opened)", closeScript, k,
				[]string{k.sessions, k.members}, id)
			if err == nil && status != "ok" {
				err = unexpected("OpenSession", status)
			}
			return err
		},
		func(id string) (string, error) {
			status, _, err := s.runLogged(ctx, "OpenSession", openScript, k, []string{k.sessions, k.members},
				id, ttlMicros(ttl), meta)
			return status, err
		})
}

// KeepAlive implements store.Store. Besides renewing the session it removes
// sessions it finds expired and logs them, so a crashed member's departure
// reaches the group within one renewal interval of any member; in the
// steady state it logs nothing.
func (s *Store) KeepAlive(ctx context.Context, group, session string, ttl time.Duration) (time.Duration, error) {
	if err := s.begin(ctx, "KeepAlive", store.ValidateKeepAlive(group, session, ttl)); err != nil {
		return 0, err
	}
	k := s.keys(group)
	status, res, err := s.runLogged(ctx, "KeepAlive", keepAliveScript, k, []string{k.sessions, k.members},
		session, ttlMicros(ttl))
	if err != nil {
		return 0, err
	}
	switch status {
	case "ok":
		return micros(str(res, 0)), nil
	case "expired":
		return 0, fmt.Errorf("redisstore: KeepAlive of session %q: %w", session, store.ErrSessionExpired)
	}
	return 0, unexpected("KeepAlive", status)
}

// CloseSession implements store.Store.
func (s *Store) CloseSession(ctx context.Context, group, session string) error {
	if err := s.begin(ctx, "CloseSession", store.ValidateCloseSession(group, session)); err != nil {
		return err
	}
	k := s.keys(group)
	status, _, err := s.runLogged(ctx, "CloseSession", closeScript, k, []string{k.sessions, k.members}, session)
	if err != nil {
		return err
	}
	if status != "ok" {
		return unexpected("CloseSession", status)
	}
	return nil
}
