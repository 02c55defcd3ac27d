package sqlitestore

import (
	"context"
	"fmt"
	"time"

	"github.com/herdhq/herd/store"
)

// Snapshot implements store.Store. It is one read transaction, which waits
// for no writer; if a session of the group is past its TTL, it is a write
// transaction instead, which expires (and logs) the due sessions first, so
// that the sessions a snapshot lists are exactly those its version's log
// has not ended. A row that cannot be decoded (written by hand or by
// another program) is left out and listed in Snapshot.Malformed.
//
// The partition set and the records come from the Store's last snapshot
// of the group when they can (cache.go): the log entries since are
// applied to it. The returned snapshot shares its Partitions and Owners
// with other snapshots: it is read-only, as the contract says.
func (s *Store) Snapshot(ctx context.Context, group string) (*store.Snapshot, error) {
	if err := s.begin(ctx, "snapshot", store.ValidateGroup(group)); err != nil {
		return nil, err
	}
	var snap *store.Snapshot
	due := false
	err := s.read(ctx, "snapshot", func(c conn) error {
		var err error
		snap, due, err = s.readSnapshot(c, group, micros(s.now()), true)
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
		snap, _, err = s.readSnapshot(w.conn, group, w.us, false)
		return err
	})
	return snap, err
}

// readSnapshot reads the group at time now (µs). With stopIfDue, it stops
// and reports due as soon as it finds a session past its TTL.
func (s *Store) readSnapshot(c conn, name string, now int64, stopIfDue bool) (snap *store.Snapshot, due bool, err error) {
	snap = &store.Snapshot{Sessions: []store.SessionInfo{}, Partitions: []store.Partition{}, Owners: []store.Ownership{}}
	g, err := loadGroup(c, name)
	if err != nil || g == nil {
		return snap, false, err
	}
	var bad []store.Malformed
	snap.Sessions, bad, due, err = readSessions(c, g, now, stopIfDue)
	if err != nil || due {
		return nil, due, err
	}
	rs, err := s.records(c, name, g)
	if err != nil {
		return nil, false, err
	}
	snap.Version = rs.version
	snap.PartitionSetStored = rs.partset
	snap.Kind = g.kind
	snap.Partitions, snap.Owners = rs.partitions, rs.owners
	if snap.Loads, err = readLoads(c, g.id); err != nil {
		return nil, false, err
	}
	if len(bad)+len(rs.malformed) > 0 {
		snap.Malformed = append(bad, rs.malformed...)
		store.SortMalformed(snap.Malformed)
	}
	return snap, false, nil
}

// readSessions reads the group's live sessions, sorted by id, and the
// session rows it cannot use.
func readSessions(c conn, g *group, now int64, stopIfDue bool) (live []store.SessionInfo, bad []store.Malformed, due bool, err error) {
	rows, err := c.rows(qSnapSessions, g.id)
	if err != nil {
		return nil, nil, false, err
	}
	defer rows.Close()
	live = []store.SessionInfo{}
	for rows.Next() {
		var si store.SessionInfo
		var weight, expires, ttl int64
		if err := rows.Scan(&si.ID, &si.Member, &weight, &expires, &ttl); err != nil {
			return nil, nil, false, err
		}
		if expires <= now {
			if stopIfDue {
				return nil, nil, true, nil
			}
			continue // not reached: a write transaction expired it first
		}
		why := store.CheckSession(si.ID, si.Member)
		if why == nil && (weight < 0 || ttl <= 0) {
			why = fmt.Errorf("weight %d or ttl %d out of range", weight, ttl)
		}
		if why != nil {
			bad = append(bad, store.BadRecord(store.MalformedSession, si.ID, "herd_sessions: "+why.Error()))
			continue
		}
		si.Weight = int(weight)
		si.Remaining = time.Duration(min(expires-now, ttl)) * time.Microsecond
		live = append(live, si)
	}
	return live, bad, false, rows.Err()
}

// readRecords reads the group's partition set and records in full.
func readRecords(c conn, g *group) (*recordSet, error) {
	rs := &recordSet{gid: g.id, partset: g.partset, partitions: []store.Partition{}, owners: []store.Ownership{}, readAt: time.Now()}
	if g.seq > 0 {
		rs.version = store.Version{Seq: g.seq, Tag: g.tag}
	}
	bad := func(kind, id, format string, args ...any) {
		rs.malformed = append(rs.malformed, store.BadRecord(kind, id, fmt.Sprintf(format, args...)))
	}
	rows, err := c.rows(qSnapPartitions, g.id)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var p store.Partition
		var weight int64
		if err := rows.Scan(&p.ID, &weight); err != nil {
			rows.Close()
			return nil, err
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
		rs.partitions = append(rs.partitions, p)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}

	rows, err = c.rows(qSnapOwners, g.id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var o store.Ownership
		var r record
		var epoch int64
		if err := rows.Scan(&o.Partition, &r.session, &r.member, &epoch, &r.givenBack); err != nil {
			return nil, err
		}
		r.epoch = uint64(epoch)
		if why := r.invalid(o.Partition); why != "" {
			bad(store.MalformedOwnership, o.Partition, "herd_owners: %s", why)
			continue
		}
		o.Session, o.Member, o.Epoch, o.GivenBack = r.session, r.member, r.epoch, r.givenBack
		rs.owners = append(rs.owners, o)
	}
	return rs, rows.Err()
}
