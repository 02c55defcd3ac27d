package pgstore

// The SQL of the calls, built once per schema.

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
)

// queries are the statements of the store, with its schema.
type queries struct {
	open, keepAlive, close, setPartitions, claim, release, checkpoint, restore string
	expire, snapshot, changes, deleteGroup, records                            string
	fenceLock, fenceWrite                                                      string // InTx
}

func (s *Store) makeQueries() queries { return buildQueries(s.qschema) }

// buildQueries makes the statements for the schema S (quoted).
func buildQueries(S string) queries {
	lock, write := fenceQueries(S)
	return queries{
		fenceLock:     lock,
		fenceWrite:    write,
		open:          "SELECT " + S + ".open_session($1, $2, $3, $4, $5, $6)",
		keepAlive:     "SELECT r_status, r_next FROM " + S + ".keep_alive($1, $2, $3, $4)",
		close:         "SELECT " + S + ".close_session($1, $2, $3)",
		setPartitions: "SELECT * FROM " + S + ".set_partition_set($1, $2, $3, $4, $5, $6, $7, $8)",
		claim:         "SELECT r_ord, r_status, r_owner, r_epoch, r_member, r_checkpoint, r_given_back FROM " + S + ".claim_batch($1, $2, $3, $4)",
		release:       "SELECT r_ord, r_status FROM " + S + ".release_batch($1, $2, $3, $4, $5, $6)",
		restore:       "SELECT " + S + ".restore($1, $2, $3, $4, $5)",
		expire:        "SELECT " + S + ".expire_sessions($1, $2)",
		deleteGroup:   "SELECT r_status, r_n FROM " + S + ".delete_group($1, $2)",
		checkpoint: `UPDATE ` + S + `.owners o SET checkpoint = $4, checkpoint_at = clock_timestamp()
FROM ` + S + `.groups g
WHERE g.name = $1 AND o.gid = g.gid AND o.partition = $2 AND o.epoch = $3::numeric AND o.session <> ''
  AND EXISTS (SELECT 1 FROM ` + S + `.sessions s WHERE s.gid = g.gid AND s.id = o.session AND s.expires > clock_timestamp())`,
		snapshot: snapshotSQL(S),
		changes: `SELECT g.seq, g.tag, g.log_start, l.seq, l.tag, l.kind, l.session, l.member, l.weight, l.partition,
  l.epoch::text, l.given_back, l.part_ids, l.part_weights, ` + S + `.micros(l.at)::bigint
FROM ` + S + `.groups g LEFT JOIN LATERAL (
  SELECT * FROM ` + S + `.log x WHERE x.gid = g.gid AND x.seq >= $2 ORDER BY x.seq LIMIT $3
) l ON true
WHERE g.name = $1 ORDER BY l.seq`,
		records: `WITH t AS (SELECT clock_timestamp() AS now)
SELECT o.partition, o.session, o.member, o.epoch::text, o.given_back, o.checkpoint,
  coalesce(greatest(` + S + `.micros(t.now) - ` + S + `.micros(o.claimed_at), 0), 0)::bigint,
  CASE WHEN o.checkpoint IS NULL THEN 0
       ELSE coalesce(greatest(` + S + `.micros(t.now) - ` + S + `.micros(o.checkpoint_at), 0), 0) END::bigint
FROM t, ` + S + `.groups g JOIN ` + S + `.owners o ON o.gid = g.gid
WHERE g.name = $1 AND o.partition = ANY($2::text[])`,
	}
}

// exec runs a statement that returns nothing the caller needs.
func (s *Store) exec(ctx context.Context, op, sql string, args ...any) error {
	return s.do(ctx, op, func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, sql, args...)
		return err
	})
}

// queryRow runs a statement that returns one row, scanned into dest.
func (s *Store) queryRow(ctx context.Context, op, sql string, args []any, dest ...any) error {
	return s.do(ctx, op, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, sql, args...).Scan(dest...)
	})
}

func isNoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }
