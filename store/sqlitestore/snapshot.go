package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/herdhq/herd/store"
)

// Snapshot implements store.Store. It is one read transaction, which waits
// for no writer; if a session of the group is past its TTL, it is a write
// transaction instead, which expires (and logs) the due sessions first, so
// that the sessions a snapshot lists are exactly those its version's log
// has not ended. A row that cannot be decoded (written by hand or by
// another program) is left out and listed in Snapshot.Malformed.
func (s *Store) Snapshot(ctx context.Context, group string) (*store.Snapshot, error) {
	if err := s.begin(ctx, "snapshot", "group", group); err != nil {
		return nil, err
	}
	var snap *store.Snapshot
	due := false
	err := s.read(ctx, "snapshot", func(c conn) error {
		var err error
		snap, due, err = readSnapshot(c, group, micros(s.now()), true)
		return err
	})
	if err != nil || !due {
		return snap, err
	}
	err = s.write(ctx, "snapshot", group, false, func(w *wtx) error {
		// The expiries first, so that the version read is after them.
		if err := w.flush(); err != nil {
			return err
		}
		var err error
		snap, _, err = readSnapshot(w.conn, group, w.us, false)
		return err
	})
	return snap, err
}

// readSnapshot reads the group at time now (µs). With stopIfDue, it stops
// and reports due as soon as it finds a session past its TTL.
func readSnapshot(c conn, name string, now int64, stopIfDue bool) (snap *store.Snapshot, due bool, err error) {
	snap = &store.Snapshot{Sessions: []store.SessionInfo{}, Partitions: []store.Partition{}, Owners: []store.Ownership{}}
	g, err := loadGroup(c, name)
	if err != nil || g == nil {
		return snap, false, err
	}
	if g.seq > 0 {
		snap.Version = store.Version{Seq: g.seq, Tag: g.tag}
	}
	snap.PartitionSetStored = g.partset
	bad := func(kind, id, format string, args ...any) {
		snap.Malformed = append(snap.Malformed, store.Malformed{Kind: kind, ID: capID(id), Reason: fmt.Sprintf(format, args...)})
	}

	rows, err := c.rows(qSnapSessions, g.id)
	if err != nil {
		return nil, false, err
	}
	for rows.Next() {
		var si store.SessionInfo
		var weight, expires, ttl int64
		if err := rows.Scan(&si.ID, &si.Member, &weight, &expires, &ttl); err != nil {
			rows.Close()
			return nil, false, err
		}
		if expires <= now {
			if stopIfDue {
				rows.Close()
				return nil, true, nil
			}
			continue // not reached: a write transaction expired it first
		}
		switch {
		case !isSessionID(si.ID):
			bad(store.MalformedSession, si.ID, "herd_sessions: not a session id this store makes (26 characters of A-Z, 2-7)")
			continue
		case store.ValidateID("member", si.Member) != nil:
			bad(store.MalformedSession, si.ID, "herd_sessions: %v", store.ValidateID("member", si.Member))
			continue
		case weight < 0 || ttl <= 0:
			bad(store.MalformedSession, si.ID, "herd_sessions: weight %d or ttl %d out of range", weight, ttl)
			continue
		}
		si.Weight = int(weight)
		si.Remaining = time.Duration(min(expires-now, ttl)) * time.Microsecond
		snap.Sessions = append(snap.Sessions, si)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, false, err
	}

	rows, err = c.rows(qSnapPartitions, g.id)
	if err != nil {
		return nil, false, err
	}
	for rows.Next() {
		var p store.Partition
		var weight int64
		if err := rows.Scan(&p.ID, &weight); err != nil {
			rows.Close()
			return nil, false, err
		}
		if err := store.ValidateID("partition", p.ID); err != nil {
			bad(store.MalformedPartition, p.ID, "herd_partitions: %v", err)
			continue
		}
		if weight < 0 {
			bad(store.MalformedPartition, p.ID, "herd_partitions: negative weight %d", weight)
			continue
		}
		p.Weight = int(weight)
		snap.Partitions = append(snap.Partitions, p)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, false, err
	}

	rows, err = c.rows(qSnapOwners, g.id)
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	for rows.Next() {
		var o store.Ownership
		var r record
		var epoch int64
		if err := rows.Scan(&o.Partition, &r.session, &r.member, &epoch, &r.givenBack); err != nil {
			return nil, false, err
		}
		r.epoch = uint64(epoch)
		if why := r.invalid(o.Partition); why != "" {
			bad(store.MalformedOwnership, o.Partition, "herd_owners: %s", why)
			continue
		}
		o.Session, o.Member, o.Epoch, o.GivenBack = r.session, r.member, r.epoch, r.givenBack
		snap.Owners = append(snap.Owners, o)
	}
	if err := rows.Err(); err != nil {
		return nil, false, err
	}
	slices.SortFunc(snap.Malformed, func(a, b store.Malformed) int {
		if c := strings.Compare(a.Kind, b.Kind); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return snap, false, nil
}

// capID cuts an id read from the file to MaxIDLength bytes.
func capID(id string) string {
	if len(id) > store.MaxIDLength {
		return id[:store.MaxIDLength]
	}
	return id
}

// Records reads the ownership records of the given partitions, with their
// checkpoints and times, in one consistent read. At most store.MaxBatch
// partitions, valid ids, none twice (store.ValidateBatch), else
// store.ErrInvalid. The result is in the order asked; a partition with no
// record is left out, and so is a record that cannot be decoded (Snapshot
// lists it in Malformed). It changes nothing and logs nothing.
func (s *Store) Records(ctx context.Context, group string, partitions []string) ([]store.Record, error) {
	if err := s.begin(ctx, "records", "group", group); err != nil {
		return nil, err
	}
	if err := store.ValidateBatch(partitions); err != nil {
		return nil, fmt.Errorf("sqlitestore: records: %w", err)
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
