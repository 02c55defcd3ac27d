package etcdstore

import (
	"context"
	"fmt"

	"github.com/herdhq/herd/store"
)

// Request implements store.Store: one transaction with no compares
// appends the request's entry (its action in the entry's "a"), as any
// other write appends its entries.
func (s *Store) Request(ctx context.Context, group string, r store.Request) error {
	const op = "request"
	if err := checkContext(ctx, op); err != nil {
		return err
	}
	if err := store.ValidateRequest(group, r); err != nil {
		return fmt.Errorf("etcdstore: %s: %w", op, err)
	}
	if err := ctx.Err(); err != nil {
		return failure(op, err)
	}
	g := s.groupKey(group)
	return retry(ctx, op, func() (bool, error) {
		w := &write{g: g, group: group}
		w.append(r.Change())
		ok, err := s.commit(ctx, w)
		if err != nil {
			return false, failure(op, err)
		}
		return ok, nil
	})
}
