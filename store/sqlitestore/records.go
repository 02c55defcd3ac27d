package sqlitestore

import (
	"context"
	"database/sql"
	"time"

	"github.com/herdhq/herd/store"
)

// Records reads the ownership records of the given partitions, with their
// checkpoints and times, in one consistent read. At most store.MaxBatch
// partitions, valid ids, none twice (store.ValidateBatch), else
// store.ErrInvalid. The result is in the order asked; a partition with no
// record is left out, and so is a record that cannot be decoded (Snapshot
// lists it in Malformed). It changes nothing and logs nothing.
func (s *Store) Records(ctx context.Context, group string, partitions []string) ([]store.Record, error) {
	if err := s.begin(ctx, "records", store.ValidateRecords(group, partitions)); err != nil {
		return nil, err
	}
	out := make([]store.Record, 0, len(partitions))
	err := s.read(ctx, "records", func(c conn) error {
		now := micros(s.now())
		g, err := loadGroup(c, group)
		if err != nil || g == nil {
			return err
		}
		for _, p := range partitions {
			var r record
			var epoch int64
			var claimedAt, writtenAt sql.NullInt64
			var value []byte
			err := c.row(qRecordFull, g.id, p).Scan(&r.session, &r.member, &epoch, &r.givenBack, &claimedAt, &value, &writtenAt)
			if err == sql.ErrNoRows {
				continue
			}
			if err != nil {
				return err
			}
			r.epoch = uint64(epoch)
			if r.invalid(p) != "" {
				continue
			}
			rec := store.Record{Ownership: store.Ownership{Partition: p, Session: r.session, Member: r.member, Epoch: r.epoch, GivenBack: r.givenBack}}
			if claimedAt.Valid {
				rec.Since = time.Duration(max(now-claimedAt.Int64, 0)) * time.Microsecond
			}
			if writtenAt.Valid {
				rec.Checkpoint = value
				if rec.Checkpoint == nil {
					rec.Checkpoint = []byte{}
				}
				rec.CheckpointAge = time.Duration(max(now-writtenAt.Int64, 0)) * time.Microsecond
			}
			out = append(out, rec)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
