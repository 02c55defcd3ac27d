package pgstore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/herdhq/herd/store"
)

// snapshotSQL reads a whole group in one statement, so in one MVCC
// snapshot: the version row (k 0), sessions (1), partitions (2) and
// ownership records (3), without checkpoints. Every column is text, read
// raw: a group of 10,000 partitions is 20,000 rows, and scanning them
// into typed values cost more than reading them.
func snapshotSQL(S string) string {
	return `WITH g AS (SELECT gid, seq, tag, partset, kind, clock_timestamp() AS now FROM ` + S + `.groups WHERE name = $1)
SELECT '0'::text AS k, ''::text AS id, g.kind AS a, NULL::text AS b, NULL::text AS c,
       g.seq::text AS n, g.tag::text AS m, CASE WHEN g.partset THEN '1' ELSE '0' END AS e FROM g
UNION ALL
SELECT '1', s.id, s.member, NULL, NULL, s.weight::text, (` + S + `.micros(s.expires) - ` + S + `.micros(g.now))::bigint::text, NULL
FROM g JOIN ` + S + `.sessions s ON s.gid = g.gid
UNION ALL
SELECT '2', p.id, NULL, NULL, NULL, p.weight::text, NULL, NULL
FROM g JOIN ` + S + `.partitions p ON p.gid = g.gid
UNION ALL
SELECT '3', o.partition, o.session, o.member, o.given_back, NULL, NULL, o.epoch::text
FROM g JOIN ` + S + `.owners o ON o.gid = g.gid
UNION ALL
SELECT '4', l.partition, NULL, NULL, NULL, NULL, NULL, l.load::text
FROM g JOIN ` + S + `.loads l ON l.gid = g.gid`
}

// Snapshot implements store.Store. One round trip: the group's due
// sessions are expired (and logged), then the group is read in one
// statement, so the sessions it lists are exactly those its log has not
// ended, and the version is the one the lists show. A row that does not
// decode (written by hand or by another program) is left out and listed in
// Malformed.
func (s *Store) Snapshot(ctx context.Context, group string) (*store.Snapshot, error) {
	if err := s.begin(ctx, "Snapshot", store.ValidateGroup(group)); err != nil {
		return nil, err
	}
	var snap *store.Snapshot
	err := s.do(ctx, "Snapshot", func(ctx context.Context) error {
		b := &pgx.Batch{}
		b.Queue(s.q.expire, group, int32(s.cfg.logLimit))
		b.Queue(s.q.snapshot, group)
		br := s.pool.SendBatch(ctx, b)
		defer br.Close()
		if _, err := br.Exec(); err != nil {
			return err
		}
		rows, err := br.Query()
		if err != nil {
			return err
		}
		snap, err = s.decodeSnapshot(rows)
		if err != nil {
			return err
		}
		return br.Close()
	})
	if err != nil {
		return nil, err
	}
	return snap, nil
}

func (s *Store) decodeSnapshot(rows pgx.Rows) (*store.Snapshot, error) {
	defer rows.Close()
	snap := &store.Snapshot{Sessions: []store.SessionInfo{}, Partitions: []store.Partition{}, Owners: []store.Ownership{}}
	bad := func(kind, table, id, format string, args ...any) {
		snap.Malformed = append(snap.Malformed, store.BadRecord(kind, id,
			fmt.Sprintf("table %s.%s: ", s.schema, table)+fmt.Sprintf(format, args...)))
	}
	num := func(b []byte) (int64, bool) {
		n, err := strconv.ParseInt(string(b), 10, 64)
		return n, err == nil
	}
	for rows.Next() {
		f := rows.RawValues()
		if len(f) != 8 || len(f[0]) != 1 {
			return nil, fmt.Errorf("snapshot row of %d columns", len(f))
		}
		id := string(f[1])
		switch f[0][0] {
		case '0':
			seq, ok1 := num(f[5])
			tag, ok2 := num(f[6])
			if !ok1 || !ok2 {
				return nil, fmt.Errorf("group row: version %q/%q", f[5], f[6])
			}
			snap.Version = store.Version{Seq: uint64(seq), Tag: uint64(tag)}
			snap.PartitionSetStored = string(f[7]) == "1"
			snap.Kind = string(f[2])
		case '1':
			member := string(f[2])
			weight, _ := num(f[5])
			left, _ := num(f[6])
			if err := store.CheckSession(id, member); err != nil {
				bad(store.MalformedSession, "sessions", id, "%v", err)
				continue
			}
			snap.Sessions = append(snap.Sessions, store.SessionInfo{ID: id, Member: member, Remaining: micros(left), Weight: int(weight)})
		case '2':
			if err := store.ValidateID("partition", id); err != nil {
				bad(store.MalformedPartition, "partitions", id, "%v", err)
				continue
			}
			weight, _ := num(f[5])
			snap.Partitions = append(snap.Partitions, store.Partition{ID: id, Weight: int(weight)})
		case '3':
			o, err := decodeOwner(id, string(f[2]), string(f[3]), string(f[4]), string(f[7]))
			if err != nil {
				bad(store.MalformedOwnership, "owners", id, "%v", err)
				continue
			}
			snap.Owners = append(snap.Owners, o)
		case '4':
			// A load that does not decode (written by hand) is left out.
			if l, err := store.ParseLoad(string(f[7])); err == nil && store.ValidateID("partition", id) == nil {
				snap.Loads = append(snap.Loads, store.Load{Partition: id, Load: l})
			}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	sortSnapshot(snap)
	store.SortLoads(snap.Loads)
	return snap, nil
}

// decodeOwner decodes one owners row; an error says what is wrong with it
// (store.CheckOwnership).
func decodeOwner(partition, session, member, givenBack, epoch string) (store.Ownership, error) {
	e, err := strconv.ParseUint(epoch, 10, 64)
	if err != nil {
		return store.Ownership{}, fmt.Errorf("epoch %q is not a number from 1 to 2^64-1", abbrev(epoch))
	}
	o := store.Ownership{Partition: partition, Session: session, Member: member, Epoch: e, GivenBack: givenBack}
	return o, store.CheckOwnership(o)
}

func sortSnapshot(snap *store.Snapshot) {
	if !slices.IsSortedFunc(snap.Sessions, func(a, b store.SessionInfo) int { return strings.Compare(a.ID, b.ID) }) {
		slices.SortFunc(snap.Sessions, func(a, b store.SessionInfo) int { return strings.Compare(a.ID, b.ID) })
	}
	if !slices.IsSortedFunc(snap.Partitions, func(a, b store.Partition) int { return strings.Compare(a.ID, b.ID) }) {
		slices.SortFunc(snap.Partitions, func(a, b store.Partition) int { return strings.Compare(a.ID, b.ID) })
	}
	if !slices.IsSortedFunc(snap.Owners, func(a, b store.Ownership) int { return strings.Compare(a.Partition, b.Partition) }) {
		slices.SortFunc(snap.Owners, func(a, b store.Ownership) int { return strings.Compare(a.Partition, b.Partition) })
	}
	store.SortMalformed(snap.Malformed)
}

// Records reads the ownership records of the given partitions, with their
// checkpoints and times, in one statement (one consistent read). At most
// store.MaxBatch partitions, valid ids, none twice, else store.ErrInvalid.
// The result is in the order asked; a partition with no record, or with a
// record that cannot be decoded (Snapshot lists it in Malformed), is left
// out. It changes nothing and logs nothing.
func (s *Store) Records(ctx context.Context, group string, partitions []string) ([]store.Record, error) {
	if err := s.begin(ctx, "Records", store.ValidateRecords(group, partitions)); err != nil {
		return nil, err
	}
	if len(partitions) == 0 {
		return []store.Record{}, nil
	}
	found := make(map[string]store.Record, len(partitions))
	err := s.do(ctx, "Records", func(ctx context.Context) error {
		clear(found)
		rows, err := s.pool.Query(ctx, s.q.records, group, partitions)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var p, session, member, epoch, givenBack string
			var checkpoint []byte
			var since, age int64
			if err := rows.Scan(&p, &session, &member, &epoch, &givenBack, &checkpoint, &since, &age); err != nil {
				return err
			}
			o, err := decodeOwner(p, session, member, givenBack, epoch)
			if err != nil {
				continue
			}
			o.Checkpoint = checkpoint
			found[p] = store.Record{Ownership: o, Since: micros(since), CheckpointAge: micros(age)}
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	out := make([]store.Record, 0, len(found))
	for _, p := range partitions {
		if r, ok := found[p]; ok {
			out = append(out, r)
		}
	}
	return out, nil
}
