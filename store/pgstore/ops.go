package pgstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/herdhq/herd/store"
)

// ttlMicros rounds a TTL up to whole microseconds.
func ttlMicros(ttl time.Duration) int64 {
	us := int64(ttl / time.Microsecond)
	if ttl%time.Microsecond != 0 {
		us++
	}
	return us
}

func micros(us int64) time.Duration {
	if us <= 0 {
		return 0
	}
	return time.Duration(us) * time.Microsecond
}

func unexpected(op, status string) error {
	return fmt.Errorf("pgstore: %s: unexpected status %q from the database (tables of another version?)", op, status)
}

// OpenSession implements store.Store. A call that fails on the network or
// its deadline may have opened its session all the same (the server ran
// it, its reply was lost): the next OpenSession of the group closes it
// first (store.Ghosts).
func (s *Store) OpenSession(ctx context.Context, group, member string, weight int, ttl time.Duration) (string, error) {
	if err := s.begin(ctx, "OpenSession", store.ValidateOpenSession(group, member, weight, ttl)); err != nil {
		return "", err
	}
	if weight > 1<<31-1 {
		return "", fmt.Errorf("pgstore: OpenSession: weight %d does not fit the weight column (int4): %w", weight, store.ErrInvalid)
	}
	s.warmOpen(ctx)
	return s.ghosts.OpenSession(group, ttl, "pgstore: OpenSession",
		func(id string) error {
			return s.exec(ctx, "OpenSession (closing a session a failed call may have opened)", s.q.close,
				group, id, int32(s.cfg.logLimit))
		},
		func(id string) (string, error) {
			var status string
			err := s.queryRow(ctx, "OpenSession", s.q.open,
				[]any{group, id, member, int32(weight), ttlMicros(ttl), int32(s.cfg.logLimit)}, &status)
			return status, err
		})
}

// KeepAlive implements store.Store. A renewal alone updates one row and
// logs nothing; if a session of the group is due, the call expires it (and
// logs that) first.
func (s *Store) KeepAlive(ctx context.Context, group, session string, ttl time.Duration) (time.Duration, error) {
	if err := s.begin(ctx, "KeepAlive", store.ValidateKeepAlive(group, session, ttl)); err != nil {
		return 0, err
	}
	var status string
	var next *int64
	if err := s.queryRow(ctx, "KeepAlive", s.q.keepAlive,
		[]any{group, session, ttlMicros(ttl), int32(s.cfg.logLimit)}, &status, &next); err != nil {
		return 0, err
	}
	switch status {
	case "ok":
		if next == nil {
			return 0, nil
		}
		return micros(*next), nil
	case "expired":
		return 0, fmt.Errorf("pgstore: KeepAlive of session %q: %w", session, store.ErrSessionExpired)
	}
	return 0, unexpected("KeepAlive", status)
}

// CloseSession implements store.Store.
func (s *Store) CloseSession(ctx context.Context, group, session string) error {
	if err := s.begin(ctx, "CloseSession", store.ValidateCloseSession(group, session)); err != nil {
		return err
	}
	return s.exec(ctx, "CloseSession", s.q.close, group, session, int32(s.cfg.logLimit))
}

// ClaimBatch implements store.Store: one statement for the whole batch.
func (s *Store) ClaimBatch(ctx context.Context, group, session string, partitions []string) ([]store.ClaimResult, error) {
	if err := s.begin(ctx, "ClaimBatch", store.ValidateClaimBatch(group, session, partitions)); err != nil {
		return nil, err
	}
	if len(partitions) == 0 {
		return []store.ClaimResult{}, nil
	}
	return s.claim(ctx, "ClaimBatch", group, session, partitions)
}

func (s *Store) claim(ctx context.Context, op, group, session string, partitions []string) ([]store.ClaimResult, error) {
	out := make([]store.ClaimResult, len(partitions))
	expired := false
	err := s.do(ctx, op, func(ctx context.Context) error {
		expired = false
		clear(out)
		rows, err := s.pool.Query(ctx, s.q.claim, group, session, partitions, int32(s.cfg.logLimit))
		if err != nil {
			return err
		}
		defer rows.Close()
		n := 0
		for rows.Next() {
			var ord int64
			var status string
			var owner, epoch, member, givenBack *string
			var checkpoint []byte
			if err := rows.Scan(&ord, &status, &owner, &epoch, &member, &checkpoint, &givenBack); err != nil {
				return err
			}
			if status == "expired" {
				expired = true
				continue
			}
			if ord < 1 || ord > int64(len(partitions)) {
				return fmt.Errorf("result for partition %d of %d", ord, len(partitions))
			}
			i := ord - 1
			p := partitions[i]
			n++
			switch status {
			case "ok":
				e, err := strconv.ParseUint(deref(epoch), 10, 64)
				if err != nil || e == 0 {
					out[i].Err = fmt.Errorf("pgstore: %s of %q: epoch %q: %w", op, p, deref(epoch), store.ErrCorrupt)
					continue
				}
				out[i] = store.ClaimResult{Ownership: store.Ownership{
					Partition: p, Session: session, Member: deref(member), Epoch: e,
					Checkpoint: checkpoint, GivenBack: deref(givenBack),
				}}
			case "claimed":
				out[i].Err = fmt.Errorf("pgstore: %s of %q: owned by session %q, alive or still in a transaction holding the record: %w", op, p, deref(owner), store.ErrClaimed)
			case "corrupt":
				out[i].Err = fmt.Errorf("pgstore: %s of %q: its ownership record cannot be decoded (written by something other than herd?): %w", op, p, store.ErrCorrupt)
			default:
				return unexpected(op, status)
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if !expired && n != len(partitions) {
			return fmt.Errorf("%d results for %d partitions", n, len(partitions))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if expired {
		return nil, fmt.Errorf("pgstore: %s by session %q: %w", op, session, store.ErrSessionExpired)
	}
	return out, nil
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// GiveBack implements store.Store: the statement of ReleaseBatch, for one
// record, that also marks it as given back by session.
func (s *Store) GiveBack(ctx context.Context, group, partition, session string, epoch uint64) error {
	if err := s.begin(ctx, "GiveBack", store.ValidateGiveBack(group, partition, session, epoch)); err != nil {
		return err
	}
	errs, err := s.release(ctx, "GiveBack", group, session, []store.Ownership{{Partition: partition, Epoch: epoch}}, true)
	if err != nil {
		return err
	}
	return errs[0]
}

// ReleaseBatch implements store.Store: one statement for the whole batch.
func (s *Store) ReleaseBatch(ctx context.Context, group, session string, held []store.Ownership) ([]error, error) {
	if err := s.begin(ctx, "ReleaseBatch", store.ValidateReleaseBatch(group, session, held)); err != nil {
		return nil, err
	}
	if len(held) == 0 {
		return []error{}, nil
	}
	return s.release(ctx, "ReleaseBatch", group, session, held, false)
}

func (s *Store) release(ctx context.Context, op, group, session string, held []store.Ownership, giveBack bool) ([]error, error) {
	parts := make([]string, len(held))
	epochs := make([]string, len(held))
	for i, o := range held {
		parts[i], epochs[i] = o.Partition, strconv.FormatUint(o.Epoch, 10)
	}
	out := make([]error, len(held))
	err := s.do(ctx, op, func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, s.q.release, group, session, parts, epochs, giveBack, int32(s.cfg.logLimit))
		if err != nil {
			return err
		}
		defer rows.Close()
		n := 0
		for rows.Next() {
			var ord int64
			var status string
			if err := rows.Scan(&ord, &status); err != nil {
				return err
			}
			if ord < 1 || ord > int64(len(held)) {
				return fmt.Errorf("result for record %d of %d", ord, len(held))
			}
			n++
			o := held[ord-1]
			switch status {
			case "ok":
				out[ord-1] = nil
			case "notowner":
				out[ord-1] = fmt.Errorf("pgstore: %s of %q at epoch %d by session %q: %w", op, o.Partition, o.Epoch, session, store.ErrNotOwner)
			case "busy":
				out[ord-1] = fmt.Errorf("pgstore: %s of %q at epoch %d by session %q: its record is locked by a transaction still open (an InTx of this session): nothing released, try again when it ends: %w",
					op, o.Partition, o.Epoch, session, store.ErrUnavailable)
			default:
				return unexpected(op, status)
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if n != len(held) {
			return fmt.Errorf("%d results for %d records", n, len(held))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Checkpoint implements store.Store: one UPDATE that checks the epoch and
// the owner's liveness. It takes no group lock and logs nothing.
func (s *Store) Checkpoint(ctx context.Context, group, partition string, epoch uint64, value []byte) error {
	if err := s.begin(ctx, "Checkpoint", store.ValidateCheckpoint(group, partition, epoch, value)); err != nil {
		return err
	}
	if value == nil {
		value = []byte{} // nil would be NULL: "never written"
	}
	var n int64
	err := s.do(ctx, "Checkpoint", func(ctx context.Context) error {
		// The record's lock may be held by an InTx of the partition: the
		// wait for it is bounded, in the statement's own transaction.
		b := &pgx.Batch{}
		b.Queue("SELECT set_config('lock_timeout', $1, true)", millis(s.cfg.lockTimeout))
		b.Queue(s.q.checkpoint, group, partition, strconv.FormatUint(epoch, 10), value).Exec(func(tag pgconn.CommandTag) error {
			n = tag.RowsAffected()
			return nil
		})
		return s.pool.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("pgstore: Checkpoint of %q at epoch %d: %w", partition, epoch, store.ErrNotOwner)
	}
	return nil
}

// Restore implements store.Store.
func (s *Store) Restore(ctx context.Context, group, partition string, epoch uint64, value []byte) error {
	if err := s.begin(ctx, "Restore", store.ValidateCheckpoint(group, partition, epoch, value)); err != nil {
		return err
	}
	if value == nil {
		value = []byte{}
	}
	var status string
	if err := s.queryRow(ctx, "Restore", s.q.restore,
		[]any{group, partition, strconv.FormatUint(epoch, 10), value, int32(s.cfg.logLimit)}, &status); err != nil {
		return err
	}
	switch status {
	case "ok":
		return nil
	case "notowner":
		return fmt.Errorf("pgstore: Restore of %q: the partition has an owned record or one with an epoch as high: %w", partition, store.ErrNotOwner)
	}
	return unexpected("Restore", status)
}

// ExpireSessions implements store.Store. It takes the group's lock only if
// a session is due. On a store that ties sessions it first cuts the ties
// whose lock is free (tie.go), in a transaction of its own.
func (s *Store) ExpireSessions(ctx context.Context, group string) (time.Duration, error) {
	if err := s.begin(ctx, "ExpireSessions", store.ValidateGroup(group)); err != nil {
		return 0, err
	}
	s.cutTies(ctx, group)
	var next int64
	if err := s.queryRow(ctx, "ExpireSessions", s.q.expire, []any{group, int32(s.cfg.logLimit)}, &next); err != nil {
		return 0, err
	}
	return micros(next), nil
}

// DeleteGroup implements store.Store: one statement deletes every row of
// the group, its log included, and wakes the group's readers (who find
// their version gone).
func (s *Store) DeleteGroup(ctx context.Context, group string, force bool) error {
	if err := s.begin(ctx, "DeleteGroup", store.ValidateGroup(group)); err != nil {
		return err
	}
	var status string
	var n *int64
	if err := s.queryRow(ctx, "DeleteGroup", s.q.deleteGroup, []any{group, force}, &status, &n); err != nil {
		return err
	}
	switch status {
	case "ok":
		s.dropDeletedTies(ctx)
		return nil
	case "inuse":
		var live int64
		if n != nil {
			live = *n
		}
		return fmt.Errorf("pgstore: DeleteGroup: %w", store.InUseError(group, int(live)))
	}
	return unexpected("DeleteGroup", status)
}
