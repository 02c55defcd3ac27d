package pgstore

// Row locks. The functions that change a group hold the group's row lock
// for their whole transaction; none of them may then wait for the lock of
// an ownership record, which a transaction outside herd's control can hold
// for as long as its process likes: an InTx whose function stalled, its
// process stopped by SIGSTOP in the middle of reading a result (its
// backend is then "active", blocked sending, so no idle timeout ends it).
// Waiting there would stop every claim, release, expiry and new session of
// the group behind it. So:
//
//   - claim_batch locks the records it may claim with SKIP LOCKED, trying
//     again for up to about 100 ms (lock_records); a record another
//     transaction still holds is "claimed" (contested: the member tries
//     again later). If that record's session has ended (the store expired
//     it: its owner is past its fence time, and nothing it does in the
//     transaction can commit, since InTx checks the session again at its
//     end), the claim first ends the backends of that session's InTx
//     transactions, which mark themselves with an application_name of
//     intxAppPrefix and the session id, and takes the record over.
//     Ending them is safe for that reason: their commit would fail.
//   - release_batch does the same with its own session's records (ending
//     nothing; while no InTx of the session is open it tries for up to
//     about 2 s, as only single Checkpoint statements hold them then) and
//     answers "busy" for one still held: an InTx of the session is open
//     (store.ErrUnavailable: try again).
//   - delete_group takes the records' locks with NOWAIT (an error, retry).
//
// Every other lock wait of the store's statements is bounded: a group
// row's holder never waits for anything but the server; Checkpoint and
// InTx's lock of its record run with a lock_timeout (WithLockTimeout).

// intxAppPrefix, followed by the session id, is the application_name of a
// connection while it runs an InTx transaction.
const intxAppPrefix = "herd InTx "

// locksRevision is the revision of locksSQL's functions, kept in the
// schema as the comment of claim_batch: a store that finds an older one
// replaces them (ensureSchema). Revision 3 reads the locked records and
// the live sessions as hashed sets, and each record by its key (see
// claim_batch); the functions before it carried no comment. Revision 4
// changes none of them, but marks the schema's finish (schema.go) that
// sends a batch's entries in its notifications: a store that finds an
// older revision replaces finish too (logTimeSQL, run with locksSQL).
const locksRevision = 4

// claimBatchSignature names claim_batch after its schema (regprocedure).
const claimBatchSignature = ".claim_batch(text, text, text[], integer)"

// locksRevisionOf is the revision of the schema's functions of locks.go
// (0 if none is marked), param being claim_batch's name with its schema.
func locksRevisionOf(param string) string {
	return "coalesce(substring(obj_description(to_regprocedure(" + param +
		"), 'pg_proc') from '^herd locks revision ([0-9]+)$')::integer, 0)"
}

// locksSQL are the functions of the schema that lock ownership records
// while they hold a group's lock (see above). They are created with the
// schema, and replace those of an older schema (upgradeSQL).
const locksSQL = `
-- end_transactions terminates the InTx transactions of p_sessions, found
-- by their application_name, and returns how many it ended. A backend it
-- is not allowed to end (another role's) is left alone.
CREATE OR REPLACE FUNCTION {{S}}.end_transactions(p_sessions text[]) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE v_pid integer; n integer := 0;
BEGIN
  FOR v_pid IN SELECT a.pid FROM pg_stat_activity a
      WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()
        AND a.application_name IN (SELECT {{APP}} || x FROM unnest(p_sessions) x) LOOP
    BEGIN
      IF pg_terminate_backend(v_pid) THEN n := n + 1; END IF;
    EXCEPTION WHEN insufficient_privilege THEN NULL;
    END;
  END LOOP;
  RETURN n;
END $$;

-- lock_free locks, with SKIP LOCKED, the records of p_parts that p_session
-- may claim (not held by another live session), or if p_own those it
-- holds, and returns their partitions.
CREATE OR REPLACE FUNCTION {{S}}.lock_free(p_gid bigint, p_session text, p_parts text[], p_now timestamptz, p_own boolean) RETURNS text[]
LANGUAGE sql AS $$
  SELECT coalesce(array_agg(x.partition), '{}') FROM (
    SELECT o.partition FROM {{S}}.owners o
    WHERE o.gid = p_gid AND o.partition = ANY(p_parts) AND CASE WHEN p_own THEN o.session = p_session
      ELSE o.session = '' OR o.session = p_session OR NOT EXISTS (
        SELECT 1 FROM {{S}}.sessions s WHERE s.gid = p_gid AND s.id = o.session AND s.expires > p_now) END
    FOR NO KEY UPDATE OF o SKIP LOCKED) x
$$;

-- lock_records locks what lock_free locks. If another transaction holds
-- some of them, it ends the InTx transactions of the sessions of those
-- that have ended (p_own: none), and tries again for up to about 100 ms
-- (a Checkpoint holds a record's lock for a moment; an ended backend lets
-- go of its locks in a few ms), or for a release (p_own) up to about 2 s
-- while no InTx of its own session is open (only Checkpoints, each one
-- statement, hold the records then). It returns the partitions locked.
-- The locked partitions and the live sessions are hashed sets, as in
-- claim_batch.
CREATE OR REPLACE FUNCTION {{S}}.lock_records(p_gid bigint, p_session text, p_parts text[], p_now timestamptz, p_own boolean) RETURNS text[]
LANGUAGE plpgsql AS $$
DECLARE v_free text[]; v_dead text[]; v_left text[];
BEGIN
  v_free := {{S}}.lock_free(p_gid, p_session, p_parts, p_now, p_own);
  FOR i IN 1..400 LOOP
    SELECT coalesce(array_agg(o.partition), '{}'),
           coalesce(array_agg(DISTINCT o.session) FILTER (WHERE o.session <> '' AND NOT p_own AND o.session NOT IN (
             SELECT s.id FROM {{S}}.sessions s WHERE s.gid = p_gid AND s.expires > p_now)), '{}')
      INTO v_left, v_dead
      FROM {{S}}.owners o
      WHERE o.gid = p_gid AND o.partition = ANY(p_parts) AND o.partition NOT IN (SELECT unnest(v_free))
        AND CASE WHEN p_own THEN o.session = p_session
          ELSE o.session = '' OR o.session = p_session OR o.session NOT IN (
            SELECT s.id FROM {{S}}.sessions s WHERE s.gid = p_gid AND s.expires > p_now) END;
    EXIT WHEN cardinality(v_left) = 0;
    -- After ~100 ms a claim calls what is left contested. A release goes
    -- on waiting, up to ~2 s, while no InTx of its session is open: the
    -- holders are then Checkpoint statements, which end on their own.
    EXIT WHEN i > 20 AND (NOT p_own OR EXISTS (SELECT 1 FROM pg_stat_activity a
      WHERE a.datname = current_database() AND a.application_name = {{APP}} || p_session));
    IF i = 1 AND cardinality(v_dead) > 0 THEN PERFORM {{S}}.end_transactions(v_dead); END IF;
    PERFORM pg_sleep(0.005);
    v_free := v_free || {{S}}.lock_free(p_gid, p_session, v_left, p_now, p_own);
  END LOOP;
  RETURN v_free;
END $$;

-- claim_batch claims p_parts for p_session, in order: one row per
-- partition (r_ord from 1) with its status (ok, claimed, corrupt), or one
-- row with r_ord 0 and status expired if the session is not alive. A
-- record another transaction holds is claimed (contested), see
-- lock_records.
--
-- Its statement reads each record once, by its key (LIMIT 1 keeps the
-- lateral probe from becoming a join the generic plan, which expects 10
-- partitions, may pick badly: a hash of all the group's records, or as in
-- release_batch before, a nested loop comparing every request with every
-- record, 390,000 comparisons and 550 ms for 625), and computes the
-- results, the records and the log entries from that read. The locked
-- partitions and the live sessions are hashed sets (IN (SELECT ...));
-- = ANY(v_free) compared each record with each element. The locks make
-- the read exact: no one else changes a record this call locked, and only
-- calls holding the group's lock write records. Medians of 5 runs, go test
-- -run X -bench 'ClaimBatch1000|ReleaseBatch1000' ./store/pgstore: claim
-- 77 -> 42 ms, release 530 -> 54 ms (load average 8-15).
CREATE OR REPLACE FUNCTION {{S}}.claim_batch(p_group text, p_session text, p_parts text[], p_limit integer)
RETURNS TABLE (r_ord bigint, r_status text, r_owner text, r_epoch text, r_member text, r_checkpoint bytea, r_given_back text)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE g {{S}}.groups; v_now timestamptz; v_us numeric; v_member text; v_seq bigint; v_tag bigint; v_free text[];
BEGIN
  g := {{S}}.lock_group(p_group, false);
  IF g.gid IS NULL THEN
    RETURN QUERY SELECT 0::bigint, 'expired'::text, NULL::text, NULL::text, NULL::text, NULL::bytea, NULL::text;
    RETURN;
  END IF;
  v_now := clock_timestamp();
  v_us := {{S}}.micros(v_now);
  SELECT * INTO v_seq, v_tag FROM {{S}}.expire(g.gid, v_now, g.seq, g.tag);
  SELECT s.member INTO v_member FROM {{S}}.sessions s WHERE s.gid = g.gid AND s.id = p_session AND s.expires > v_now;
  IF NOT FOUND THEN
    PERFORM {{S}}.finish(g, v_seq, v_tag, p_limit);
    RETURN QUERY SELECT 0::bigint, 'expired'::text, NULL::text, NULL::text, NULL::text, NULL::bytea, NULL::text;
    RETURN;
  END IF;
  v_free := {{S}}.lock_records(g.gid, p_session, p_parts, v_now, false);
  RETURN QUERY
  WITH cur AS (
    SELECT r.p, r.ord, o.session AS osess, o.checkpoint AS ockpt,
      greatest(coalesce(o.epoch, 0) + 1, v_us)::numeric(20,0) AS nepoch,
      CASE WHEN o.given_back = p_session THEN '' ELSE coalesce(o.given_back, '') END AS ngb,
      CASE
        WHEN o.partition IS NULL THEN 'ok'
        WHEN o.session <> '' AND (o.session !~ '^[A-Z2-7]{26}$' OR NOT {{S}}.valid_id(o.member)) THEN 'corrupt'
        WHEN o.session = '' AND o.member <> '' THEN 'corrupt'
        WHEN o.session <> '' AND o.session <> p_session AND o.session IN (
          SELECT s.id FROM {{S}}.sessions s WHERE s.gid = g.gid AND s.expires > v_now) THEN 'claimed'
        WHEN o.partition NOT IN (SELECT unnest(v_free)) THEN 'claimed'
        WHEN o.epoch >= 18446744073709551615 THEN 'corrupt'
        ELSE 'ok'
      END AS st
    FROM unnest(p_parts) WITH ORDINALITY AS r(p, ord) LEFT JOIN LATERAL (
      SELECT x.partition, x.session, x.member, x.epoch, x.given_back, x.checkpoint FROM {{S}}.owners x
      WHERE x.gid = g.gid AND x.partition = r.p LIMIT 1) o ON true
  ), up AS (
    INSERT INTO {{S}}.owners AS o (gid, partition, session, member, epoch, given_back, claimed_at)
    SELECT g.gid, c.p, p_session, v_member, c.nepoch, c.ngb, v_now FROM cur c WHERE c.st = 'ok'
    ON CONFLICT (gid, partition) DO UPDATE SET session = EXCLUDED.session, member = EXCLUDED.member,
      epoch = EXCLUDED.epoch, given_back = EXCLUDED.given_back, claimed_at = EXCLUDED.claimed_at
  ), lg AS (
    INSERT INTO {{S}}.log (gid, seq, tag, kind, session, member, partition, epoch, given_back)
    SELECT g.gid, v_seq + row_number() OVER (ORDER BY c.ord), {{S}}.new_tag(), 4, p_session, v_member, c.p, c.nepoch, c.ngb
    FROM cur c WHERE c.st = 'ok'
  )
  SELECT c.ord, c.st, c.osess, CASE WHEN c.st = 'ok' THEN c.nepoch::text END, v_member,
    CASE WHEN c.st = 'ok' THEN c.ockpt END, CASE WHEN c.st = 'ok' THEN c.ngb END
  FROM cur c ORDER BY c.ord;
  SELECT * INTO v_seq, v_tag FROM {{S}}.caught_up(g.gid, v_seq, v_tag);
  PERFORM {{S}}.finish(g, v_seq, v_tag, p_limit);
END $$;

-- release_batch releases each (p_parts[i], p_epochs[i]) held by
-- p_session, marking it given back by p_session if p_give_back: one row
-- per partition with status ok, notowner, or busy (its record is held by
-- another transaction, an InTx of the session's: nothing done). Its
-- statement reads and writes as claim_batch's does.
CREATE OR REPLACE FUNCTION {{S}}.release_batch(p_group text, p_session text, p_parts text[], p_epochs text[], p_give_back boolean, p_limit integer)
RETURNS TABLE (r_ord bigint, r_status text)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE g {{S}}.groups; v_now timestamptz; v_seq bigint; v_tag bigint; v_free text[];
BEGIN
  g := {{S}}.lock_group(p_group, false);
  IF g.gid IS NOT NULL THEN
    v_now := clock_timestamp();
    SELECT * INTO v_seq, v_tag FROM {{S}}.expire(g.gid, v_now, g.seq, g.tag);
    IF NOT EXISTS (SELECT 1 FROM {{S}}.sessions s WHERE s.gid = g.gid AND s.id = p_session AND s.expires > v_now) THEN
      PERFORM {{S}}.finish(g, v_seq, v_tag, p_limit);
      g.gid := NULL;
    END IF;
  END IF;
  IF g.gid IS NULL THEN
    RETURN QUERY SELECT u.ord, 'notowner'::text FROM unnest(p_parts) WITH ORDINALITY AS u(p, ord);
    RETURN;
  END IF;
  v_free := {{S}}.lock_records(g.gid, p_session, p_parts, v_now, true);
  RETURN QUERY
  WITH cur AS (
    SELECT r.p, r.ord, o.epoch,
      CASE WHEN p_give_back THEN p_session ELSE o.given_back END AS ngb,
      CASE WHEN o.session IS DISTINCT FROM p_session OR o.epoch IS DISTINCT FROM r.e::numeric THEN 'notowner'
        WHEN r.p IN (SELECT unnest(v_free)) THEN 'ok'
        ELSE 'busy' END AS st
    FROM unnest(p_parts, p_epochs) WITH ORDINALITY AS r(p, e, ord) LEFT JOIN LATERAL (
      SELECT x.session, x.epoch, x.given_back FROM {{S}}.owners x
      WHERE x.gid = g.gid AND x.partition = r.p LIMIT 1) o ON true
  ), up AS (
    UPDATE {{S}}.owners o SET session = '', member = '', given_back = CASE WHEN p_give_back THEN p_session ELSE o.given_back END
    WHERE o.gid = g.gid AND o.partition = ANY(ARRAY(SELECT c.p FROM cur c WHERE c.st = 'ok')) AND o.session = p_session
  ), lg AS (
    INSERT INTO {{S}}.log (gid, seq, tag, kind, session, partition, epoch, given_back)
    SELECT g.gid, v_seq + row_number() OVER (ORDER BY c.ord), {{S}}.new_tag(), 5, p_session, c.p, c.epoch, c.ngb
    FROM cur c WHERE c.st = 'ok'
  )
  SELECT c.ord, c.st FROM cur c ORDER BY c.ord;
  SELECT * INTO v_seq, v_tag FROM {{S}}.caught_up(g.gid, v_seq, v_tag);
  PERFORM {{S}}.finish(g, v_seq, v_tag, p_limit);
END $$;

-- delete_group deletes everything of the group, log included, unless a
-- session is alive and p_force is not set (status inuse, r_n live
-- sessions). A record held by a transaction is an error (lock not
-- available), not a wait.
CREATE OR REPLACE FUNCTION {{S}}.delete_group(p_group text, p_force boolean, OUT r_status text, OUT r_n bigint)
LANGUAGE plpgsql AS $$
DECLARE g {{S}}.groups;
BEGIN
  r_status := 'ok';
  g := {{S}}.lock_group(p_group, false);
  IF g.gid IS NULL THEN RETURN; END IF;
  SELECT count(*) INTO r_n FROM {{S}}.sessions WHERE gid = g.gid AND expires > clock_timestamp();
  IF r_n > 0 AND NOT p_force THEN r_status := 'inuse'; RETURN; END IF;
  PERFORM 1 FROM {{S}}.owners WHERE gid = g.gid FOR UPDATE NOWAIT;
  DELETE FROM {{S}}.sessions WHERE gid = g.gid;
  DELETE FROM {{S}}.partitions WHERE gid = g.gid;
  DELETE FROM {{S}}.owners WHERE gid = g.gid;
  DELETE FROM {{S}}.log WHERE gid = g.gid;
  DELETE FROM {{S}}.groups WHERE gid = g.gid;
  PERFORM pg_notify({{CHAN}}, g.name);
END $$;

COMMENT ON FUNCTION {{S}}.claim_batch(text, text, text[], integer) IS 'herd locks revision {{LOCKSREV}}';
`
