package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/herdhq/herd/store"
)

// SetPartitions implements store.Store. The group's row holds its kind and
// the digest of its set: a set equal to the stored one is found so, in one
// row read, and nothing is written. (A herd before the digest, writing the
// same file, replaces the set without it: the digest then names the set it
// replaced until the next write by this herd. Members follow the stored
// set whatever the digest says; only SetResult can be wrong meanwhile.)
func (s *Store) SetPartitions(ctx context.Context, group string, ps store.PartitionSet) (store.SetResult, error) {
	if err := s.begin(ctx, "set partitions", store.ValidateSetPartitions(group, ps)); err != nil {
		return store.SetResult{}, err
	}
	var digest string
	var set []store.Partition
	if ps.Mode != store.SetKindOnly {
		digest = store.Digest(ps.Partitions)
		set = slices.Clone(ps.Partitions)
		slices.SortFunc(set, func(a, b store.Partition) int { return strings.Compare(a.ID, b.ID) })
	}
	if res, ok := s.setUnchanged(ctx, group, ps, digest); ok {
		return res, nil
	}
	var res store.SetResult
	err := s.write(ctx, "set partitions", group, true, func(w *wtx) error {
		write, r, err := store.DecideSet(group, store.GroupSet{Kind: w.g.kind, Stored: w.g.partset, Digest: w.g.digest}, ps, digest)
		res = r
		if err != nil {
			return &bailout{err: fmt.Errorf("sqlitestore: set partitions: %w", err)}
		}
		if r.Kind != w.g.kind {
			if _, err := w.exec(qSetKind, r.Kind, w.g.id); err != nil {
				return err
			}
			w.g.kind = r.Kind
		}
		if !write {
			return nil
		}
		if _, err := w.exec(qDeletePartitions, w.g.id); err != nil {
			return err
		}
		for _, p := range set {
			if _, err := w.exec(qInsertPartition, w.g.id, p.ID, int64(p.Weight)); err != nil {
				return err
			}
		}
		if _, err := w.exec(qSetPartset, digest, w.g.id); err != nil {
			return err
		}
		w.g.partset, w.g.digest = true, digest
		w.log(store.Change{Kind: store.PartitionsSet, Partitions: set})
		return nil
	})
	if err != nil && !errors.Is(err, store.ErrGroupKind) {
		return store.SetResult{}, err
	}
	return res, err
}

// setUnchanged is SetPartitions' answer, decided in a read transaction,
// when the call would change nothing (ok): the group holds the set (or
// any, for SetIfAbsent) and the kind already. It takes no write lock, so
// the members of a fleet starting together, which all set the one set,
// do not queue one by one behind each other's writes for it (16 processes
// starting together: 16 write transactions, 1-9 ms each with the lock
// held; TestSetSamePartitionsTakesNoWriteLock). Anything else, or a failed
// read, is left to the write, which decides again.
func (s *Store) setUnchanged(ctx context.Context, group string, ps store.PartitionSet, digest string) (res store.SetResult, ok bool) {
	err := s.read(ctx, "set partitions", func(c conn) error {
		g, err := loadGroup(c, group)
		if err != nil || g == nil {
			return err
		}
		write, r, err := store.DecideSet(group, store.GroupSet{Kind: g.kind, Stored: g.partset, Digest: g.digest}, ps, digest)
		res, ok = r, err == nil && !write && r.Kind == g.kind
		return nil
	})
	return res, ok && err == nil
}

// addKindColumns adds the columns kind and digest to herd_groups in a file
// written by a herd before them (see addColumns).
func addKindColumns(ctx context.Context, db *sql.DB) error {
	return addColumns(ctx, db, "herd_groups", "the group kind", []string{"kind", "digest"}, []string{
		`ALTER TABLE herd_groups ADD COLUMN kind TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE herd_groups ADD COLUMN digest TEXT NOT NULL DEFAULT ''`,
	})
}
