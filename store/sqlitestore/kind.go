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

// addKindColumns adds the columns kind and digest to herd_groups in a file
// written by a herd before them (see addColumns).
func addKindColumns(ctx context.Context, db *sql.DB) error {
	return addColumns(ctx, db, "herd_groups", "the group kind", []string{"kind", "digest"}, []string{
		`ALTER TABLE herd_groups ADD COLUMN kind TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE herd_groups ADD COLUMN digest TEXT NOT NULL DEFAULT ''`,
	})
}
