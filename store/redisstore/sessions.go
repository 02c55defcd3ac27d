package redisstore

// Sessions: open, renew, close.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/herdhq/herd/store"
)

// OpenSession implements store.Store. A call that fails on the network or
// its deadline may have opened its session all the same (the server ran
// it, its reply was lost): the store remembers the session's id, and the
// next OpenSession of the group closes it first (see ghosts).
func (s *Store) OpenSession(ctx context.Context, group, member string, weight int, ttl time.Duration) (string, error) {
	if err := s.begin(ctx, "OpenSession", store.ValidateOpenSession(group, member, weight, ttl)); err != nil {
		return "", err
	}
	k := s.keys(group)
	if err := s.closeGhosts(ctx, group, k); err != nil {
		return "", err
	}
	meta := strconv.Itoa(weight) + ":" + member
	tried := ""
	id, err := store.OpenWithNewID("redisstore: OpenSession", func(id string) (string, error) {
		tried = id
		status, _, err := s.runLogged(ctx, "OpenSession", openScript, k, []string{k.sessions, k.members},
			id, ttlMicros(ttl), meta)
		return status, err
	})
	if err != nil && tried != "" && errors.Is(err, store.ErrUnavailable) {
		s.ghosts.add(group, tried, ttl)
	}
	return id, err
}

// closeGhosts closes the sessions of group that calls of OpenSession which
// failed may have opened. A failure leaves the rest to the next call.
func (s *Store) closeGhosts(ctx context.Context, group string, k keys) error {
	ids := s.ghosts.take(group)
	for i, id := range ids {
		status, _, err := s.runLogged(ctx, "OpenSession (closing a session a failed call may have opened)", closeScript, k,
			[]string{k.sessions, k.members}, id.id)
		if err == nil && status != "ok" {
			err = unexpected("OpenSession", status)
		}
		if err != nil {
			s.ghosts.put(group, ids[i:])
			return err
		}
	}
	return nil
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
