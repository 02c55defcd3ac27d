package memstore

// Claims, releases, checkpoints and restores under the store's lock.

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/herdhq/herd/store"
)

// claimLocked claims partition for session, known to be alive.
func (s *Store) claimLocked(g *group, partition, session string, now time.Time) (store.Ownership, error) {
	r := g.records[partition]
	switch {
	case r == nil:
		r = &record{own: store.Ownership{Partition: partition}, pos: -1}
		g.records[partition] = r
		g.pending = append(g.pending, r)
	case r.own.Session != session && g.alive(r.own.Session):
		return store.Ownership{}, fmt.Errorf("memstore: claim %q: owned by session %q: %w", partition, r.own.Session, store.ErrClaimed)
	}
	r.own.Session = session
	r.own.Member = g.byID[session].member
	r.own.Epoch = store.NextEpoch(r.own.Epoch, now)
	if r.own.GivenBack == session {
		r.own.GivenBack = "" // the giver took it again
	}
	r.since = now
	g.touch(r)
	s.logChange(g, store.Change{Kind: store.Claimed, Partition: partition, Session: session, Member: r.own.Member, Epoch: r.own.Epoch})
	return cloneOwnership(r.own), nil
}

// releaseLocked releases partition, giving it back if giveBack is set; g
// may be nil.
func (s *Store) releaseLocked(g *group, partition, session string, epoch uint64, giveBack bool) error {
	var r *record
	if g != nil {
		r = g.records[partition]
	}
	if r == nil || r.own.Epoch != epoch || r.own.Session != session || !g.alive(session) {
		op := "release"
		if giveBack {
			op = "give back"
		}
		return fmt.Errorf("memstore: %s %q at epoch %d by session %q: %w", op, partition, epoch, session, store.ErrNotOwner)
	}
	r.own.Session, r.own.Member = "", ""
	c := store.Change{Kind: store.Released, Partition: partition, Session: session, Epoch: epoch}
	if giveBack {
		r.own.GivenBack, c.GivenBack = session, session
	}
	g.touch(r)
	s.logChange(g, c)
	return nil
}

// Checkpoint implements store.Store. The value is copied.
func (s *Store) Checkpoint(ctx context.Context, group, partition string, epoch uint64, value []byte) error {
	if err := store.ValidateCheckpoint(group, partition, epoch, value); err != nil {
		return fmt.Errorf("memstore: checkpoint: %w", err)
	}
	value = bytes.Clone(value) // outside the lock: it may be a megabyte
	now, err := s.begin(ctx, "checkpoint", nil)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	g := s.group(group, false)
	var r *record
	if g != nil {
		r = g.records[partition]
	}
	if r == nil || r.own.Epoch != epoch || !g.alive(r.own.Session) {
		return fmt.Errorf("memstore: checkpoint %q at epoch %d: %w", partition, epoch, store.ErrNotOwner)
	}
	// Replaced, never mutated: a Claim's copy is made under the lock, but
	// the value is not shown in snapshots, so the shared view is untouched.
	r.own.Checkpoint, r.checkpointed = value, now
	return nil
}

// Restore implements store.Store.
func (s *Store) Restore(ctx context.Context, group, partition string, epoch uint64, value []byte) error {
	if err := store.ValidateCheckpoint(group, partition, epoch, value); err != nil {
		return fmt.Errorf("memstore: restore: %w", err)
	}
	value = bytes.Clone(value)
	now, err := s.begin(ctx, "restore", nil)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	g := s.group(group, true)
	if r := g.records[partition]; r != nil {
		if r.own.Session != "" || r.own.Epoch >= epoch {
			return fmt.Errorf("memstore: restore %q: the partition has an owned record or one with an epoch as high: %w", partition, store.ErrNotOwner)
		}
		// A released record with a lower epoch: restored after a data loss
		// by a member that lost the partition before this caller had it.
		r.own.Epoch, r.own.Checkpoint, r.own.GivenBack = epoch, value, ""
		r.since, r.checkpointed = now, now
		g.touch(r)
		s.logChange(g, store.Change{Kind: store.Restored, Partition: partition, Epoch: epoch})
		return nil
	}
	r := &record{own: store.Ownership{Partition: partition, Epoch: epoch, Checkpoint: value}, pos: -1, since: now, checkpointed: now}
	g.records[partition] = r
	g.pending = append(g.pending, r)
	g.touch(r)
	s.logChange(g, store.Change{Kind: store.Restored, Partition: partition, Epoch: epoch})
	return nil
}
