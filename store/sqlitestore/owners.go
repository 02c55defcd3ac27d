package sqlitestore

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/herdhq/herd/store"
)

// record is an ownership row as a transaction found it.
type record struct {
	session, member, givenBack string
	epoch                      uint64
}

// invalid says what is wrong with a row written by someone else, "" if
// nothing is.
func (r record) invalid(partition string) string {
	switch {
	case store.ValidateID("partition", partition) != nil:
		return "malformed partition id"
	case r.epoch == 0:
		return "epoch 0"
	case r.session == "" && r.member != "":
		return "member without a session"
	case r.session != "" && (store.ValidateID("session", r.session) != nil || store.ValidateID("member", r.member) != nil):
		return "malformed session or member id"
	case r.givenBack != "" && store.ValidateID("session", r.givenBack) != nil:
		return "malformed given_back session id"
	}
	return ""
}

// loadRecord reads partition's row (ok false if none).
func (w *wtx) loadRecord(partition string) (r record, ok bool, err error) {
	var epoch int64
	err = w.step.row(qRecord,
		w.g.id, partition).Scan(&r.session, &r.member, &epoch, &r.givenBack)
	if errors.Is(err, sql.ErrNoRows) {
		return r, false, nil
	}
	r.epoch = uint64(epoch)
	return r, err == nil, err
}

func corrupt(op, partition, why string) error {
	return fmt.Errorf("sqlitestore: %s: the ownership record of %q cannot be used (%s; written by something other than herd?): %w",
		op, partition, why, store.ErrCorrupt)
}

// ClaimBatch implements store.Store: one transaction for the batch.
func (s *Store) ClaimBatch(ctx context.Context, group, session string, partitions []string) ([]store.ClaimResult, error) {
	if err := s.begin(ctx, "claim batch", store.ValidateClaimBatch(group, session, partitions)); err != nil {
		return nil, err
	}
	if len(partitions) == 0 {
		return []store.ClaimResult{}, nil
	}
	return s.claim(ctx, "claim batch", group, session, partitions)
}

func (s *Store) claim(ctx context.Context, op, group, session string, partitions []string) ([]store.ClaimResult, error) {
	out := make([]store.ClaimResult, len(partitions))
	err := s.write(ctx, op, group, false, func(w *wtx) error {
		member, ok, err := w.alive(session)
		if err != nil {
			return err
		}
		if !ok {
			return &bailout{fmt.Errorf("sqlitestore: %s by session %q: %w", op, session, store.ErrSessionExpired)}
		}
		floor, err := w.epochFloor()
		if err != nil {
			return err
		}
		live := map[string]bool{} // other owners' liveness, read once per batch
		for i, p := range partitions {
			if err := w.ctx.Err(); err != nil { // see wtx.step
				return err
			}
			out[i].Ownership, out[i].Err, err = w.claimOne(op, p, session, member, floor, live)
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// claimOne claims partition for session (alive, of member). res is
// ErrClaimed or ErrCorrupt for this partition alone; err a database error.
// live caches whether the other sessions that own records are alive: the
// transaction's time is fixed, so is each answer. One statement reads the
// record and its checkpoint (which the claim does not change): with the
// write and the log entry, three per partition instead of four.
func (w *wtx) claimOne(op, partition, session, member string, floor uint64, live map[string]bool) (o store.Ownership, res, err error) {
	var r record
	var found, hasCP bool
	var epoch int64
	var cp []byte
	if err := w.step.row(qClaimRead, w.g.id, partition).Scan(&found, &r.session, &r.member, &epoch, &r.givenBack, &hasCP, &cp); err != nil {
		return o, nil, err
	}
	r.epoch = uint64(epoch)
	if found {
		if why := r.invalid(partition); why != "" {
			return o, corrupt(op, partition, why), nil
		}
		if r.session != "" && r.session != session {
			alive, err := w.aliveIn(live, r.session)
			if err != nil {
				return o, nil, err
			}
			if alive {
				return o, fmt.Errorf("sqlitestore: %s of %q: owned by live session %q: %w", op, partition, r.session, store.ErrClaimed), nil
			}
		}
	}
	next := store.NextEpoch(max(r.epoch, floor), w.now)
	givenBack := r.givenBack
	if givenBack == session {
		givenBack = "" // the giver claims it back: the mark is moot
	}
	if _, err := w.step.exec(qClaimOwner,
		w.g.id, partition, session, member, int64(next), givenBack, w.us); err != nil {
		return o, nil, err
	}
	switch {
	case !hasCP:
		cp = nil
	case cp == nil:
		cp = []byte{}
	}
	w.log(store.Change{Kind: store.Claimed, Partition: partition, Session: session, Member: member, Epoch: next})
	return store.Ownership{Partition: partition, Session: session, Member: member, Epoch: next, Checkpoint: cp, GivenBack: givenBack}, nil, nil
}

// GiveBack implements store.Store: the release of ReleaseBatch, for one
// record, that also marks it as given back by session.
func (s *Store) GiveBack(ctx context.Context, group, partition, session string, epoch uint64) error {
	if err := s.begin(ctx, "give back", store.ValidateGiveBack(group, partition, session, epoch)); err != nil {
		return err
	}
	var res error
	err := s.write(ctx, "give back", group, false, func(w *wtx) error {
		var err error
		res, err = w.release("give back", partition, session, epoch, true, nil)
		return err
	})
	if err != nil {
		return err
	}
	return res
}

// ReleaseBatch implements store.Store: one transaction for the batch.
func (s *Store) ReleaseBatch(ctx context.Context, group, session string, held []store.Ownership) ([]error, error) {
	if err := s.begin(ctx, "release batch", store.ValidateReleaseBatch(group, session, held)); err != nil {
		return nil, err
	}
	if len(held) == 0 {
		return []error{}, nil
	}
	out := make([]error, len(held))
	err := s.write(ctx, "release batch", group, false, func(w *wtx) error {
		live := map[string]bool{} // the session's liveness, read once per batch
		for i, o := range held {
			if err := w.ctx.Err(); err != nil { // see wtx.step
				return err
			}
			var err error
			if out[i], err = w.release("release batch", o.Partition, session, o.Epoch, false, live); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// release releases partition if its record names session (alive) at
// epoch. res is ErrNotOwner or ErrCorrupt; err a database error. live
// caches the session's liveness across a batch (nil: none).
func (w *wtx) release(op, partition, session string, epoch uint64, giveBack bool, live map[string]bool) (res, err error) {
	notOwner := fmt.Errorf("sqlitestore: %s of %q at epoch %d by session %q: %w", op, partition, epoch, session, store.ErrNotOwner)
	if w.g == nil {
		return notOwner, nil
	}
	r, found, err := w.loadRecord(partition)
	if err != nil || !found {
		return notOwner, err
	}
	if why := r.invalid(partition); why != "" {
		return corrupt(op, partition, why), nil
	}
	if r.epoch != epoch || r.session != session {
		return notOwner, nil
	}
	if alive, err := w.aliveIn(live, session); err != nil || !alive {
		return notOwner, err
	}
	givenBack := r.givenBack
	if giveBack {
		givenBack = session
	}
	if _, err := w.step.exec(qRelease,
		givenBack, w.g.id, partition); err != nil {
		return nil, err
	}
	c := store.Change{Kind: store.Released, Partition: partition, Session: session, Epoch: epoch}
	if giveBack {
		c.GivenBack = session
	}
	w.log(c)
	return nil, nil
}

// Checkpoint implements store.Store. It logs nothing.
func (s *Store) Checkpoint(ctx context.Context, group, partition string, epoch uint64, value []byte) error {
	if err := s.begin(ctx, "checkpoint", store.ValidateCheckpoint(group, partition, epoch, value)); err != nil {
		return err
	}
	var res error
	err := s.write(ctx, "checkpoint", group, false, func(w *wtx) error {
		notOwner := fmt.Errorf("sqlitestore: checkpoint of %q at epoch %d: %w", partition, epoch, store.ErrNotOwner)
		if w.g == nil {
			res = notOwner
			return nil
		}
		r, found, err := w.loadRecord(partition)
		if err != nil {
			return err
		}
		if !found || r.epoch != epoch {
			res = notOwner
			return nil
		}
		if _, live, err := w.alive(r.session); err != nil || !live {
			res = notOwner
			return err
		}
		return w.setCheckpoint(partition, value)
	})
	if err != nil {
		return err
	}
	return res
}

// setCheckpoint writes partition's checkpoint; nil deletes it.
func (w *wtx) setCheckpoint(partition string, value []byte) error {
	if value == nil {
		_, err := w.exec(qDeleteCheckpoint, w.g.id, partition)
		return err
	}
	_, err := w.exec(qSetCheckpoint,
		w.g.id, partition, value, w.us)
	return err
}

// Restore implements store.Store.
func (s *Store) Restore(ctx context.Context, group, partition string, epoch uint64, value []byte) error {
	if err := s.begin(ctx, "restore", store.ValidateCheckpoint(group, partition, epoch, value)); err != nil {
		return err
	}
	value = bytes.Clone(value)
	var res error
	err := s.write(ctx, "restore", group, true, func(w *wtx) error {
		r, found, err := w.loadRecord(partition)
		if err != nil {
			return err
		}
		switch {
		case found && r.invalid(partition) != "":
			res = corrupt("restore", partition, r.invalid(partition))
			return nil
		case found && (r.session != "" || r.epoch >= epoch):
			res = fmt.Errorf("sqlitestore: restore of %q: the partition has an owned record or one with an epoch as high: %w", partition, store.ErrNotOwner)
			return nil
		case found:
			// A released record with a lower epoch: restored after a data
			// loss by a member that lost the partition before this caller
			// had it. The given-back mark stays.
			_, err = w.exec(qRestoreOwner,
				int64(epoch), w.us, w.g.id, partition)
		default:
			_, err = w.exec(qInsertRestored, w.g.id, partition, int64(epoch), w.us)
		}
		if err != nil {
			return err
		}
		if err := w.setCheckpoint(partition, value); err != nil {
			return err
		}
		w.log(store.Change{Kind: store.Restored, Partition: partition, Epoch: epoch})
		return nil
	})
	if err != nil {
		return err
	}
	return res
}
