package sqlitestore

import (
	"context"

	"github.com/herdhq/herd/store"
)

// Request implements store.Store: one write transaction appends the
// request's entry (creating the group's row if there is none).
func (s *Store) Request(ctx context.Context, group string, r store.Request) error {
	if err := s.begin(ctx, "request", store.ValidateRequest(group, r)); err != nil {
		return err
	}
	return s.write(ctx, "request", group, true, func(w *wtx) error {
		w.log(r.Change())
		return nil
	})
}

// A Requested entry has no session: its row keeps the request's action in
// the session column (herd_log has no column of its own for it), and the
// tag chains over the row as stored. stored and loaded move it there and
// back.

// stored is c as its row holds it.
func stored(c store.Change) store.Change {
	if c.Kind == store.Requested {
		c.Session, c.Action = c.Action, ""
	}
	return c
}

// loaded is the entry a row holds (see stored).
func loaded(c store.Change) store.Change {
	if c.Kind == store.Requested {
		c.Action, c.Session = c.Session, ""
	}
	return c
}
