package pgstore

// SchemaVersion is the version of the tables and functions this package
// writes and reads. Open refuses a schema of a later version (written by a
// newer herd), which it could misread. Version 2 gave groups their kind and
// the digest of their set (partset.go), and replaced the functions that
// waited for locks of ownership records (locks.go); a store upgrades a
// schema of version 1 when it opens it.
const SchemaVersion = 2

// Log entry kinds as the log table stores them (column kind). They are part
// of the schema: never renumbered.
const (
	kindOpened   = 1
	kindClosed   = 2
	kindExpired  = 3
	kindClaimed  = 4
	kindReleased = 5
	kindRestored = 6
	kindSet      = 7
	// kindRequested = 8: request.go
	// kindLoads = 9: loads.go
)

// finishSQL is the function finish (of schemaSQL, and replaced by
// logTimeSQL in a schema that predates the log's time or locks revision 4).
// Its notes are in the format of the single note older members decode, so
// they take a batch's entries from them too. Making the notes costs a
// claim of 625 about 3 ms more under the group's lock (BenchmarkPlacement10k,
// 16 such claims: 180 ms before, 230 ms after), against 16 readers' reads
// of its rows, about 4 ms each alone (BenchmarkReadLog625): go test -run X
// -bench 'Placement10k|ReadLog625' -benchtime 30x ./store/pgstore/.
const finishSQL = `-- finish records the log's new end in the group's row, trims the log to
-- p_limit entries (in steps of a quarter of it), and notifies listeners,
-- if anything was appended. The notifications carry the new entries when
-- there are at most 1,000 and none is a partition set (see listen.go): in
-- notes of under 7,500 bytes each, sent in order in this transaction, so
-- delivered one after the other, each the group, 0x1d, the version its
-- entries follow, then each entry, fields separated by 0x1f, entries by
-- 0x1e (ids hold no control characters); otherwise one notification of
-- the group alone. An entry's last field is its time (at) in µs, '' if
-- unknown.
CREATE OR REPLACE FUNCTION {{S}}.finish(g {{S}}.groups, p_seq bigint, p_tag bigint, p_limit integer) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE ls bigint := g.log_start; v_n bigint; v_big boolean; v_notes text[]; v_note text;
BEGIN
  IF p_seq = g.seq THEN RETURN; END IF;
  IF p_seq - g.seq <= 1000 THEN
    WITH e AS (
      SELECT l.seq, coalesce(lag(l.seq) OVER w, g.seq) AS aseq, coalesce(lag(l.tag) OVER w, g.tag) AS atag,
        l.seq || E'\x1f' || l.tag || E'\x1f' || l.kind
        || E'\x1f' || coalesce(l.session, '') || E'\x1f' || coalesce(l.member, '') || E'\x1f' || coalesce(l.weight::text, '')
        || E'\x1f' || coalesce(l.partition, '') || E'\x1f' || coalesce(l.epoch::text, '') || E'\x1f' || coalesce(l.given_back, '')
        || E'\x1f' || coalesce({{S}}.micros(l.at)::bigint::text, '') AS t
      FROM {{S}}.log l WHERE l.gid = g.gid AND l.seq > g.seq AND l.kind <> 7
      WINDOW w AS (ORDER BY l.seq)
    ), c AS (
      SELECT e.*, (sum(octet_length(e.t) + 1) OVER (ORDER BY e.seq)) / 7000 AS chunk FROM e
    ), n AS (
      SELECT chunk, g.name || E'\x1d' || min(aseq) || E'\x1f' || (array_agg(atag ORDER BY seq))[1]
        || E'\x1e' || string_agg(t, E'\x1e' ORDER BY seq) AS payload, count(*) AS k
      FROM c GROUP BY chunk
    )
    SELECT sum(k), bool_or(octet_length(payload) >= 7500), array_agg(payload ORDER BY chunk)
      INTO v_n, v_big, v_notes FROM n;
    IF v_n IS DISTINCT FROM p_seq - g.seq OR v_big THEN
      v_notes := NULL;
    END IF;
  END IF;
  IF p_seq - ls + 1 > p_limit + p_limit / 4 THEN
    ls := p_seq - p_limit + 1;
    DELETE FROM {{S}}.log WHERE gid = g.gid AND seq < ls;
  END IF;
  UPDATE {{S}}.groups SET seq = p_seq, tag = p_tag, log_start = ls WHERE gid = g.gid;
  IF v_notes IS NULL THEN
    PERFORM pg_notify({{CHAN}}, g.name);
  ELSE
    FOREACH v_note IN ARRAY v_notes LOOP
      PERFORM pg_notify({{CHAN}}, v_note);
    END LOOP;
  END IF;
END $$;
`

// logTimeSQL adds the log's time (column at) to a schema of version 2
// that predates it, without a new version: rows of a herd before it
// (which writes through the same functions, and whose statements name
// their columns) get the default too, and its notifications' decoder,
// which wants entries of 9 fields, finds 10 and reads the table instead.
// The column has no value in the rows already there (their At is zero),
// and its default is set after adding it, so adding it rewrites nothing.
//
// The default is the start of the calling statement on the server's
// clock (statement_timestamp): every writer's, and every entry of one
// call the same; a call that waited for the group's lock may log an entry
// a little earlier than the one before it, by that wait.
const logTimeSQL = `
ALTER TABLE {{S}}.log ADD COLUMN IF NOT EXISTS at timestamptz;
ALTER TABLE {{S}}.log ALTER COLUMN at SET DEFAULT statement_timestamp();
{{FINISH}}
`

// The schema. {{S}} is the quoted schema name, {{CHAN}} the notification
// channel as a string literal. Every operation that reads and writes is one
// call of one of these functions, so it is one statement and one
// transaction. Each that changes a group first locks the group's row (every
// write of the log is made under it, so the log is ordered and gap-free and
// its entries commit in order), expires due sessions, makes its change and
// appends its entries, then bumps the group's version, trims the log and
// notifies, all in the same transaction.
//
// The functions with set-based statements use generic plans: a custom plan
// per call costs more to make (about 0.5 ms) than a single claim does to run,
// and performs no better on a batch of a thousand.
//
// Times come from clock_timestamp(), the server's clock, read once per call
// after the group's lock is taken. Epochs are numeric(20,0), every uint64;
// they are passed as text.
const schemaSQL = `
CREATE TABLE {{S}}.groups (
  gid bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  name text COLLATE "C" NOT NULL UNIQUE,
  seq bigint NOT NULL DEFAULT 0,       -- the last log entry's sequence number
  tag bigint NOT NULL DEFAULT 0,       -- the last log entry's tag
  log_start bigint NOT NULL DEFAULT 1, -- the oldest entry kept
  partset boolean NOT NULL DEFAULT false,
  kind text NOT NULL DEFAULT '',       -- the group's kind (store.KindPartitions, store.KindKeys)
  digest text NOT NULL DEFAULT ''      -- store.Digest of the stored set ('' if unknown)
);

CREATE TABLE {{S}}.sessions (
  gid bigint NOT NULL,
  id text COLLATE "C" NOT NULL,
  member text COLLATE "C" NOT NULL,
  weight integer NOT NULL CHECK (weight >= 0),
  expires timestamptz NOT NULL,
  PRIMARY KEY (gid, id)
);
CREATE INDEX sessions_expiry ON {{S}}.sessions (gid, expires);

CREATE TABLE {{S}}.partitions (
  gid bigint NOT NULL,
  id text COLLATE "C" NOT NULL,
  weight integer NOT NULL CHECK (weight >= 0),
  PRIMARY KEY (gid, id)
);

CREATE TABLE {{S}}.owners (
  gid bigint NOT NULL,
  partition text COLLATE "C" NOT NULL,
  session text COLLATE "C" NOT NULL DEFAULT '',
  member text COLLATE "C" NOT NULL DEFAULT '',
  epoch numeric(20,0) NOT NULL CHECK (epoch >= 1 AND epoch <= 18446744073709551615),
  given_back text COLLATE "C" NOT NULL DEFAULT '',
  claimed_at timestamptz,
  checkpoint bytea,
  checkpoint_at timestamptz,
  PRIMARY KEY (gid, partition)
);

CREATE TABLE {{S}}.log (
  gid bigint NOT NULL,
  seq bigint NOT NULL,
  tag bigint NOT NULL,
  kind smallint NOT NULL,
  session text COLLATE "C",
  member text COLLATE "C",
  weight integer,
  partition text COLLATE "C",
  epoch numeric(20,0),
  given_back text COLLATE "C",
  part_ids text[],
  part_weights integer[],
  at timestamptz DEFAULT statement_timestamp(), -- see logTimeSQL
  PRIMARY KEY (gid, seq)
);

-- A random tag for a new entry: 53 bits, never 0.
CREATE FUNCTION {{S}}.new_tag() RETURNS bigint LANGUAGE sql VOLATILE AS
$$ SELECT floor(random() * 9007199254740990)::bigint + 1 $$;

-- Microseconds since 1970, exactly.
CREATE FUNCTION {{S}}.micros(t timestamptz) RETURNS numeric LANGUAGE sql IMMUTABLE AS
$$ SELECT extract(epoch FROM date_trunc('second', t))::numeric * 1000000
        + (extract(microseconds FROM t)::numeric % 1000000) $$;

-- What store.ValidateID accepts (up to the control characters a text
-- column can hold).
CREATE FUNCTION {{S}}.valid_id(v text) RETURNS boolean LANGUAGE sql IMMUTABLE AS
$$ SELECT v IS NOT NULL AND v <> '' AND octet_length(v) <= 512 AND v !~ '[\x01-\x1f\x7f]' $$;

-- lock_group locks the group's row, creating it if create is set; all
-- fields are null if there is none.
CREATE FUNCTION {{S}}.lock_group(p_group text, p_create boolean) RETURNS {{S}}.groups
LANGUAGE plpgsql AS $$
DECLARE g {{S}}.groups;
BEGIN
  LOOP
    SELECT * INTO g FROM {{S}}.groups WHERE name = p_group FOR UPDATE;
    IF FOUND OR NOT p_create THEN RETURN g; END IF;
    INSERT INTO {{S}}.groups (name) VALUES (p_group) ON CONFLICT (name) DO NOTHING RETURNING * INTO g;
    IF FOUND THEN RETURN g; END IF;
  END LOOP;
END $$;

-- expire ends the group's sessions whose expiry is not after p_now and
-- logs each; p_seq and p_tag follow the log.
CREATE FUNCTION {{S}}.expire(p_gid bigint, p_now timestamptz, INOUT p_seq bigint, INOUT p_tag bigint)
LANGUAGE plpgsql AS $$
DECLARE n bigint;
BEGIN
  WITH d AS (DELETE FROM {{S}}.sessions WHERE gid = p_gid AND expires <= p_now RETURNING id)
  INSERT INTO {{S}}.log (gid, seq, tag, kind, session)
    SELECT p_gid, p_seq + row_number() OVER (ORDER BY d.id), {{S}}.new_tag(), 3, d.id FROM d;
  GET DIAGNOSTICS n = ROW_COUNT;
  IF n > 0 THEN
    p_seq := p_seq + n;
    SELECT l.tag INTO p_tag FROM {{S}}.log l WHERE l.gid = p_gid AND l.seq = p_seq;
  END IF;
END $$;

-- caught_up returns the sequence and tag of the group's last entry after
-- entries were appended with a set-based insert from p_seq on.
CREATE FUNCTION {{S}}.caught_up(p_gid bigint, INOUT p_seq bigint, INOUT p_tag bigint)
LANGUAGE plpgsql AS $$
DECLARE n bigint;
BEGIN
  SELECT max(l.seq) INTO n FROM {{S}}.log l WHERE l.gid = p_gid AND l.seq > p_seq;
  IF n IS NOT NULL THEN
    p_seq := n;
    SELECT l.tag INTO p_tag FROM {{S}}.log l WHERE l.gid = p_gid AND l.seq = n;
  END IF;
END $$;

{{FINISH}}
CREATE FUNCTION {{S}}.open_session(p_group text, p_id text, p_member text, p_weight integer, p_ttl_us bigint, p_limit integer)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE g {{S}}.groups; v_now timestamptz; v_seq bigint; v_tag bigint;
BEGIN
  g := {{S}}.lock_group(p_group, true);
  v_now := clock_timestamp();
  SELECT * INTO v_seq, v_tag FROM {{S}}.expire(g.gid, v_now, g.seq, g.tag);
  INSERT INTO {{S}}.sessions (gid, id, member, weight, expires)
    VALUES (g.gid, p_id, p_member, p_weight, v_now + p_ttl_us * interval '1 microsecond')
    ON CONFLICT DO NOTHING;
  IF NOT FOUND THEN
    PERFORM {{S}}.finish(g, v_seq, v_tag, p_limit);
    RETURN 'dup';
  END IF;
  v_seq := v_seq + 1;
  v_tag := {{S}}.new_tag();
  INSERT INTO {{S}}.log (gid, seq, tag, kind, session, member, weight) VALUES (g.gid, v_seq, v_tag, 1, p_id, p_member, p_weight);
  PERFORM {{S}}.finish(g, v_seq, v_tag, p_limit);
  RETURN 'ok';
END $$;

-- next_expiry is the time in µs until the earliest expiry of a session of
-- the group (0 if none; at least 1 if one is due).
CREATE FUNCTION {{S}}.next_expiry(p_gid bigint, p_now timestamptz) RETURNS bigint
LANGUAGE sql AS $$
  SELECT CASE WHEN min(expires) IS NULL THEN 0
              ELSE greatest({{S}}.micros(min(expires)) - {{S}}.micros(p_now), 1) END::bigint
  FROM {{S}}.sessions WHERE gid = p_gid
$$;

-- keep_alive renews a live session. It takes the group's lock only when a
-- session of the group is due (then it expires and logs it): a renewal
-- alone writes one row and logs nothing.
CREATE FUNCTION {{S}}.keep_alive(p_group text, p_id text, p_ttl_us bigint, p_limit integer, OUT r_status text, OUT r_next bigint)
LANGUAGE plpgsql AS $$
DECLARE g {{S}}.groups; v_gid bigint; v_now timestamptz := clock_timestamp(); v_seq bigint; v_tag bigint;
BEGIN
  SELECT gid INTO v_gid FROM {{S}}.groups WHERE name = p_group;
  IF NOT FOUND THEN r_status := 'expired'; RETURN; END IF;
  IF EXISTS (SELECT 1 FROM {{S}}.sessions WHERE gid = v_gid AND expires <= v_now) THEN
    g := {{S}}.lock_group(p_group, false);
    IF g.gid IS NULL THEN r_status := 'expired'; RETURN; END IF;
    v_gid := g.gid;
    v_now := clock_timestamp();
    SELECT * INTO v_seq, v_tag FROM {{S}}.expire(g.gid, v_now, g.seq, g.tag);
    PERFORM {{S}}.finish(g, v_seq, v_tag, p_limit);
  END IF;
  UPDATE {{S}}.sessions SET expires = v_now + p_ttl_us * interval '1 microsecond'
    WHERE gid = v_gid AND id = p_id AND expires > v_now;
  IF NOT FOUND THEN r_status := 'expired'; RETURN; END IF;
  r_status := 'ok';
  r_next := {{S}}.next_expiry(v_gid, v_now);
END $$;

-- expire_sessions expires the group's due sessions (taking the lock only
-- if there are some) and returns the time until the next expiry.
CREATE FUNCTION {{S}}.expire_sessions(p_group text, p_limit integer) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE g {{S}}.groups; v_gid bigint; v_seq bigint; v_tag bigint;
BEGIN
  SELECT gid INTO v_gid FROM {{S}}.groups WHERE name = p_group;
  IF NOT FOUND THEN RETURN 0; END IF;
  IF EXISTS (SELECT 1 FROM {{S}}.sessions WHERE gid = v_gid AND expires <= clock_timestamp()) THEN
    g := {{S}}.lock_group(p_group, false);
    IF g.gid IS NULL THEN RETURN 0; END IF;
    v_gid := g.gid;
    SELECT * INTO v_seq, v_tag FROM {{S}}.expire(g.gid, clock_timestamp(), g.seq, g.tag);
    PERFORM {{S}}.finish(g, v_seq, v_tag, p_limit);
  END IF;
  RETURN {{S}}.next_expiry(v_gid, clock_timestamp());
END $$;

CREATE FUNCTION {{S}}.close_session(p_group text, p_id text, p_limit integer) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE g {{S}}.groups; v_seq bigint; v_tag bigint;
BEGIN
  g := {{S}}.lock_group(p_group, false);
  IF g.gid IS NULL THEN RETURN; END IF;
  SELECT * INTO v_seq, v_tag FROM {{S}}.expire(g.gid, clock_timestamp(), g.seq, g.tag);
  DELETE FROM {{S}}.sessions WHERE gid = g.gid AND id = p_id;
  IF FOUND THEN
    v_seq := v_seq + 1;
    v_tag := {{S}}.new_tag();
    INSERT INTO {{S}}.log (gid, seq, tag, kind, session) VALUES (g.gid, v_seq, v_tag, 2, p_id);
  END IF;
  PERFORM {{S}}.finish(g, v_seq, v_tag, p_limit);
END $$;

{{SETPARTITIONS}}
-- restore writes a released record at p_epoch with the checkpoint where
-- the partition has no record, or a released one with a lower epoch.
CREATE FUNCTION {{S}}.restore(p_group text, p_part text, p_epoch text, p_value bytea, p_limit integer) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE g {{S}}.groups; v_now timestamptz; v_seq bigint; v_tag bigint; v_sess text; v_epoch numeric;
BEGIN
  g := {{S}}.lock_group(p_group, true);
  SELECT o.session, o.epoch INTO v_sess, v_epoch FROM {{S}}.owners o WHERE o.gid = g.gid AND o.partition = p_part;
  IF FOUND AND (v_sess <> '' OR v_epoch >= p_epoch::numeric) THEN RETURN 'notowner'; END IF;
  v_now := clock_timestamp();
  INSERT INTO {{S}}.owners AS o (gid, partition, session, member, epoch, given_back, claimed_at, checkpoint, checkpoint_at)
    VALUES (g.gid, p_part, '', '', p_epoch::numeric, '', v_now, p_value, v_now)
    ON CONFLICT (gid, partition) DO UPDATE SET session = '', member = '', epoch = EXCLUDED.epoch, given_back = '',
      claimed_at = EXCLUDED.claimed_at, checkpoint = EXCLUDED.checkpoint, checkpoint_at = EXCLUDED.checkpoint_at;
  v_seq := g.seq + 1;
  v_tag := {{S}}.new_tag();
  INSERT INTO {{S}}.log (gid, seq, tag, kind, partition, epoch) VALUES (g.gid, v_seq, v_tag, 6, p_part, p_epoch::numeric);
  PERFORM {{S}}.finish(g, v_seq, v_tag, p_limit);
  RETURN 'ok';
END $$;

`
