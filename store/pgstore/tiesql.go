package pgstore

// The SQL of session ties (store.ConnTied; docs/takeover.md): a table of
// ties and the functions that make, watch and cut them. It is installed
// by the first TieSession of a store (CREATE ... IF NOT EXISTS, CREATE OR
// REPLACE), not with the schema: stores that never tie a session never
// create it, and the schema's version does not change.

import (
	"context"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// tiesInstallLock is the key of the transaction-level advisory lock under
// which stores install the ties' SQL one at a time (a single bigint key:
// another space than the ties' own two-integer keys).
const tiesInstallLock = 0x6865726474696573 // "herdties"

// tiesRevision is the revision of tiesSQL, kept in the comment of watch:
// a store finds the ties' SQL of this revision or later installed with a
// read, and installs nothing. Raise it with every change to tiesSQL.
const tiesRevision = 1

// watchSignature names the procedure that carries tiesRevision.
const watchSignature = ".watch(text, text, integer, integer, text, bigint)"

// tiesSQL: {{S}} the quoted schema, {{SCHEMA}} its name as a literal,
// {{TIEAPP}} tieAppPrefix as a literal.
const tiesSQL = `
CREATE TABLE IF NOT EXISTS {{S}}.ties (
  gid bigint NOT NULL,
  id text COLLATE "C" NOT NULL,     -- the session
  k1 integer NOT NULL,              -- its advisory lock's key
  k2 integer NOT NULL,
  grace_us bigint NOT NULL,         -- how long after the cut the session ends
  born timestamptz NOT NULL DEFAULT clock_timestamp(),
  cut timestamptz,                  -- when its lock was first seen free
  PRIMARY KEY (gid, id)
);

-- tie takes, for the calling connection, the session-level advisory lock
-- of session p_id and records the tie: 'ok', 'expired' if the session is
-- not alive, 'taken' if the lock is held (a key that collides).
CREATE OR REPLACE FUNCTION {{S}}.tie(p_group text, p_id text, p_grace_us bigint) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE v_gid bigint;
  v_k1 integer := hashtext({{SCHEMA}} || ' ' || p_group) & 2147483647;
  v_k2 integer := hashtext(p_id) & 2147483647;
BEGIN
  SELECT gid INTO v_gid FROM {{S}}.groups WHERE name = p_group;
  IF NOT FOUND OR NOT EXISTS (SELECT 1 FROM {{S}}.sessions s
      WHERE s.gid = v_gid AND s.id = p_id AND s.expires > clock_timestamp()) THEN
    RETURN 'expired';
  END IF;
  IF NOT pg_try_advisory_lock(v_k1, v_k2) THEN RETURN 'taken'; END IF;
  INSERT INTO {{S}}.ties (gid, id, k1, k2, grace_us) VALUES (v_gid, p_id, v_k1, v_k2, p_grace_us)
    ON CONFLICT DO NOTHING;
  IF NOT FOUND THEN
    PERFORM pg_advisory_unlock(v_k1, v_k2);
    RETURN 'taken';
  END IF;
  RETURN 'ok';
END $$;

-- nudge cancels the watches of the group's other ties, so that the one
-- before p_id's in the ring, which may be waiting on the one after it,
-- watches p_id's from now on (all of them start again: a join is rare,
-- and which tie came before is then not a question of timing). It is
-- called once tie has committed, or a watch started again would not see
-- the new tie yet.
CREATE OR REPLACE FUNCTION {{S}}.nudge(p_group text, p_id text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_cancel_backend(a.pid) FROM pg_stat_activity a
    WHERE a.datname = current_database() AND a.pid <> pg_backend_pid() AND a.state = 'active' AND a.query LIKE '%.watch(%'
      AND a.application_name IN (SELECT {{TIEAPP}} || x.id FROM {{S}}.ties x JOIN {{S}}.groups g ON g.gid = x.gid
        WHERE g.name = p_group AND x.cut IS NULL AND x.id <> p_id);
EXCEPTION WHEN insufficient_privilege THEN NULL;
END $$;

-- cut_ties forgets the ties of ended sessions and those made before the
-- server last started (their locks went with it, their members may be
-- cut off: they keep their TTL), marks cut every tie of the group whose
-- lock no backend holds, caps each cut session's expiry at cut + grace,
-- and returns the time in µs until the earliest of those (0 if none, at
-- least 1 if one is due).
CREATE OR REPLACE FUNCTION {{S}}.cut_ties(p_gid bigint) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE v_now timestamptz := clock_timestamp(); v_next numeric;
BEGIN
  DELETE FROM {{S}}.ties x WHERE x.gid = p_gid AND (x.born < pg_postmaster_start_time()
    OR NOT EXISTS (SELECT 1 FROM {{S}}.sessions s WHERE s.gid = p_gid AND s.id = x.id));
  UPDATE {{S}}.ties x SET cut = v_now WHERE x.gid = p_gid AND x.cut IS NULL AND NOT EXISTS (
    SELECT 1 FROM pg_locks l
    WHERE l.locktype = 'advisory' AND l.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
      AND l.classid = x.k1::oid AND l.objid = x.k2::oid AND l.objsubid = 2 AND l.mode = 'ExclusiveLock' AND l.granted);
  UPDATE {{S}}.sessions s SET expires = x.cut + x.grace_us * interval '1 microsecond'
    FROM {{S}}.ties x
    WHERE x.gid = p_gid AND x.cut IS NOT NULL AND s.gid = p_gid AND s.id = x.id
      AND s.expires > x.cut + x.grace_us * interval '1 microsecond';
  SELECT min({{S}}.micros(x.cut + x.grace_us * interval '1 microsecond')) - {{S}}.micros(v_now) INTO v_next
    FROM {{S}}.ties x WHERE x.gid = p_gid AND x.cut IS NOT NULL;
  IF v_next IS NULL THEN RETURN 0; END IF;
  RETURN greatest(v_next, 1)::bigint;
END $$;

-- cut_group runs cut_ties for a group, if it has ties (ExpireSessions'
-- backstop), and returns what cut_ties returns.
CREATE OR REPLACE FUNCTION {{S}}.cut_group(p_group text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE v_gid bigint;
BEGIN
  SELECT gid INTO v_gid FROM {{S}}.groups WHERE name = p_group;
  IF NOT FOUND OR NOT EXISTS (SELECT 1 FROM {{S}}.ties x WHERE x.gid = v_gid) THEN RETURN 0; END IF;
  RETURN {{S}}.cut_ties(v_gid);
END $$;

-- watch waits, up to p_wait_ms, for the lock of the next tie of the
-- group after p_id (by id, around the ring) to be free, and then cuts
-- every tie whose lock is free (cut_ties). r_status: 'cut' (r_next:
-- cut_ties' answer), 'idle' (the wait ended; call again), 'gone' (p_id's
-- own tie is no more: its session ended). A procedure (herd versions
-- that asked every 0.8 s called a function watch of three arguments,
-- which a server may still hold; the nudge of either version cancels
-- both).
--
-- One call is one statement per p_wait_ms (60 s), however long the ring
-- lives unchanged: joins cancel it (nudge), a leave or a death frees the
-- lock it waits for, and a round that finds its own tie or the one it
-- waits for gone ends it ('idle': the caller reads the ring again).
-- Inside, it waits in rounds of at most p_beat_ms and below
-- deadlock_timeout: the ring's waits form a cycle (each tie holds
-- its lock and waits for the next one's), which the server breaks with an
-- error only once a single wait outlasts deadlock_timeout; a round ends
-- first, and one that did not (deadlock_timeout below 125 ms) is caught
-- and waited again. After each round it sends a DEBUG message (the tied
-- connection sets client_min_messages = debug1): the member's sign that
-- its connection lives, which it needs at least every p_beat_ms (its
-- silence deadline, docs/takeover.md), and, for a server without
-- client_connection_check_interval, a write that fails once the member is
-- dead, which ends the backend. Each round ends with COMMIT, a procedure's
-- own (the call is never inside a transaction block), which drops the
-- snapshot and the tables' locks: the backend holds back vacuum's horizon
-- (backend_xmin) for one round at most, and no DDL queues behind a wait.
CREATE OR REPLACE PROCEDURE {{S}}.watch(p_group text, p_id text, p_wait_ms integer, p_beat_ms integer,
  INOUT r_status text DEFAULT NULL, INOUT r_next bigint DEFAULT NULL)
LANGUAGE plpgsql AS $$
DECLARE v_gid bigint; v_k1 integer; v_k2 integer; v_next text; v_got boolean;
  v_round integer := least(p_beat_ms, greatest(100,
    (extract(epoch FROM current_setting('deadlock_timeout')::interval) * 800)::integer));
  v_end timestamptz := clock_timestamp() + p_wait_ms * interval '1 millisecond';
BEGIN
  SELECT gid INTO v_gid FROM {{S}}.groups WHERE name = p_group;
  IF NOT FOUND OR NOT EXISTS (SELECT 1 FROM {{S}}.ties x WHERE x.gid = v_gid AND x.id = p_id AND x.cut IS NULL) THEN
    r_status := 'gone';
    RETURN;
  END IF;
  SELECT x.id, x.k1, x.k2 INTO v_next, v_k1, v_k2 FROM {{S}}.ties x
    WHERE x.gid = v_gid AND x.cut IS NULL AND x.id <> p_id
    ORDER BY x.id < p_id, x.id LIMIT 1;
  COMMIT;
  LOOP
    v_got := false;
    IF v_next IS NOT NULL THEN
      BEGIN
        PERFORM set_config('lock_timeout', v_round || 'ms', true);
        PERFORM pg_advisory_lock_shared(v_k1, v_k2);
        v_got := true;
      EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
        NULL;
      END;
    ELSE
      PERFORM pg_sleep(v_round / 1000.0);
    END IF;
    IF v_got THEN
      PERFORM pg_advisory_unlock_shared(v_k1, v_k2);
      r_next := {{S}}.cut_ties(v_gid);
      r_status := 'cut';
      RETURN;
    END IF;
    EXIT WHEN clock_timestamp() >= v_end;
    -- The tie waited for, or this one, gone (a session ended while its
    -- connection lives: a member stalled past its TTL): the ring changed
    -- without a join's nudge, and the caller watches it again.
    EXIT WHEN NOT EXISTS (SELECT 1 FROM {{S}}.ties x WHERE x.gid = v_gid AND x.id = p_id AND x.cut IS NULL)
      OR (v_next IS NOT NULL AND NOT EXISTS (SELECT 1 FROM {{S}}.ties x WHERE x.gid = v_gid AND x.id = v_next AND x.cut IS NULL));
    RAISE DEBUG 'herd tie: waiting';
    COMMIT;
  END LOOP;
  r_status := 'idle';
END $$;

COMMENT ON PROCEDURE {{S}}.watch(text, text, integer, integer, text, bigint) IS 'herd ties revision {{TIESREV}}';
`

// ensureTies installs the ties' SQL, once per store.
func (s *Store) ensureTies(ctx context.Context) error {
	s.ties.mu.Lock()
	defer s.ties.mu.Unlock()
	if s.ties.ready {
		return nil
	}
	if !s.tiesInstalled(ctx) {
		if err := s.installTies(ctx); err != nil {
			return err
		}
	}
	S := s.qschema
	s.ties.q = tieQueries{
		tie:      "SELECT " + S + ".tie($1, $2, $3)",
		nudge:    "SELECT " + S + ".nudge($1, $2)",
		watch:    "CALL " + S + ".watch($1, $2, $3, $4, NULL, NULL)",
		cutGroup: "SELECT " + S + ".cut_group($1)",
	}
	s.ties.ready = true
	return nil
}

// tiesInstalled reports whether the ties' SQL of tiesRevision or later is
// installed, read in one round trip without the install's lock: 16
// members starting together each installed it, one after the other (22
// ms median a member, 16 member processes on PostgreSQL), replacing the
// functions the others were running. Any failure says no: installTies
// then reports it.
func (s *Store) tiesInstalled(ctx context.Context) bool {
	var ok bool
	err := s.pool.QueryRow(ctx, "SELECT coalesce(substring(obj_description(to_regprocedure($1), 'pg_proc') from '^herd ties revision ([0-9]+)$')::integer, 0) >= $2",
		append(s.oneTrip(), s.qschema+watchSignature, tiesRevision)...).Scan(&ok)
	return err == nil && ok
}

// installTies installs the ties' SQL, one store at a time.
func (s *Store) installTies(ctx context.Context) error {
	text := strings.NewReplacer("{{SCHEMA}}", quoteLiteral(s.schema), "{{TIEAPP}}", quoteLiteral(tieAppPrefix),
		"{{TIESREV}}", strconv.Itoa(tiesRevision)).Replace(tiesSQL)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(tiesInstallLock)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, s.sqlFor(text))
		return err
	})
	if err != nil {
		return s.fail("TieSession: installing the ties table and functions", err)
	}
	return nil
}
