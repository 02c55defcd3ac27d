package sqlitestore

import (
	"context"
	"fmt"
	"time"

	"github.com/herdhq/herd/store"
)

// OpenSession implements store.Store.
func (s *Store) OpenSession(ctx context.Context, group, member string, weight int, ttl time.Duration) (string, error) {
	if err := s.begin(ctx, "open session", store.ValidateOpenSession(group, member, weight, ttl)); err != nil {
		return "", err
	}
	id := store.NewSessionID()
	err := s.write(ctx, "open session", group, true, func(w *wtx) error {
		_, err := w.exec(qInsertSession,
			w.g.id, id, member, int64(weight), w.us+ttlMicros(ttl), ttlMicros(ttl))
		if err != nil {
			return err // a repeated random id of 130 bits: not in practice
		}
		w.log(store.Change{Kind: store.SessionOpened, Session: id, Member: member, Weight: weight})
		return nil
	})
	if err != nil {
		return "", err
	}
	return id, nil
}

// KeepAlive implements store.Store. It also expires (and logs) the
// group's sessions whose TTL has passed.
func (s *Store) KeepAlive(ctx context.Context, group, session string, ttl time.Duration) (time.Duration, error) {
	if err := s.begin(ctx, "keep alive", store.ValidateKeepAlive(group, session, ttl)); err != nil {
		return 0, err
	}
	var next time.Duration
	var res error
	err := s.writeAs(ctx, true, "keep alive", group, false, func(w *wtx) error {
		if w.g == nil {
			res = fmt.Errorf("sqlitestore: keep alive of session %q: %w", session, store.ErrSessionExpired)
			return nil
		}
		r, err := w.exec(qRenew,
			w.us+ttlMicros(ttl), ttlMicros(ttl), w.g.id, session, w.us)
		if err != nil {
			return err
		}
		if n, err := r.RowsAffected(); err != nil || n == 0 {
			res = fmt.Errorf("sqlitestore: keep alive of session %q: %w", session, store.ErrSessionExpired)
			return err
		}
		next, err = w.nextExpiry()
		return err
	})
	if err != nil {
		return 0, err
	}
	return next, res
}

// CloseSession implements store.Store.
func (s *Store) CloseSession(ctx context.Context, group, session string) error {
	if err := s.begin(ctx, "close session", store.ValidateCloseSession(group, session)); err != nil {
		return err
	}
	return s.write(ctx, "close session", group, false, func(w *wtx) error {
		if w.g == nil {
			return nil
		}
		r, err := w.exec(qDeleteSession, w.g.id, session)
		if err != nil {
			return err
		}
		if n, err := r.RowsAffected(); err != nil || n == 0 {
			return err
		}
		w.log(store.Change{Kind: store.SessionClosed, Session: session})
		return nil
	})
}

// ExpireSessions implements store.Store: one transaction cuts the
// group's ties whose lock is free (tie.go) and expires every due session
// of the group.
func (s *Store) ExpireSessions(ctx context.Context, group string) (time.Duration, error) {
	if err := s.begin(ctx, "expire sessions", store.ValidateGroup(group)); err != nil {
		return 0, err
	}
	var next time.Duration
	err := s.write(ctx, "expire sessions", group, false, func(w *wtx) error {
		if _, err := w.cutTies(); err != nil {
			return err
		}
		var err error
		next, err = w.nextExpiry()
		return err
	})
	return next, err
}

// expire is ExpireSessions for a tie that saw a lock released: it returns
// the time until the earliest end of a cut tie's session (0 if none).
func (s *Store) expire(ctx context.Context, group string) (time.Duration, error) {
	var next time.Duration
	err := s.write(ctx, "expire sessions", group, false, func(w *wtx) error {
		var err error
		next, err = w.cutTies()
		return err
	})
	return next, err
}
