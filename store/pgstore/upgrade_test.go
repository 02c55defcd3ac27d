package pgstore

import (
	"strings"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
)

// A schema of version 1 (before the group's kind) is upgraded by Open to
// version 2, keeping its groups; the set_partitions of version 1, which
// members of that version still running call, then clears the digest so
// that their set is never taken for the one whose digest was kept.
func TestOpenUpgradesSchemaV1(t *testing.T) {
	requireServer(t)
	schema := newSchema(t)
	s := openIn(t, schema)
	set := []store.Partition{{ID: "a"}}
	if _, err := s.SetPartitions(t.Context(), "g", store.PartitionSet{Partitions: set}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	q := `"` + schema + `"`
	admin(t, `ALTER TABLE `+q+`.groups DROP COLUMN kind, DROP COLUMN digest`)
	admin(t, `DROP FUNCTION `+q+`.set_partition_set`)
	admin(t, `UPDATE `+q+`.schema_version SET version = 1`)

	s = openIn(t, schema)
	res, err := s.SetPartitions(t.Context(), "g", store.PartitionSet{Kind: store.KindPartitions, Partitions: set})
	if err != nil {
		t.Fatalf("SetPartitions after the upgrade: %v", err)
	}
	if res.Kind != store.KindPartitions || !res.Written {
		t.Fatalf("SetPartitions after the upgrade = %+v; want kind partitions, written (the digest was unknown)", res)
	}
	// A member of version 1 sets another set: the digest is cleared.
	admin(t, `SELECT `+q+`.set_partitions('g', ARRAY['b'], ARRAY[1], 100)`)
	res, err = s.SetPartitions(t.Context(), "g", store.PartitionSet{Kind: store.KindPartitions, Partitions: set})
	if err != nil || !res.Written {
		t.Fatalf("SetPartitions of the first set again, after a member of version 1 set another = %+v, %v; want written", res, err)
	}
}

// A schema of version 2 from before the log's time (no column at, a
// finish that notifies entries of 9 fields) is brought up to date by
// Open: the entries already there read with a zero At, those after it
// carry the time, notified or read from the table.
func TestOpenAddsLogTime(t *testing.T) {
	requireServer(t)
	schema := newSchema(t)
	s := openIn(t, schema)
	if _, err := s.SetPartitions(t.Context(), "g", store.PartitionSet{Partitions: []store.Partition{{ID: "a"}}}); err != nil {
		t.Fatal(err)
	}
	snap, err := s.Snapshot(t.Context(), "g")
	if err != nil {
		t.Fatal(err)
	}
	sess, err := s.OpenSession(t.Context(), "g", "m", 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	q := `"` + schema + `"`
	admin(t, `ALTER TABLE `+q+`.log DROP COLUMN at`)
	oldFinish := strings.Replace(finishSQL, "\n        || E'\\x1f' || coalesce({{S}}.micros(l.at)::bigint::text, '')", "", 1)
	if oldFinish == finishSQL {
		t.Fatal("finishSQL does not notify the time as this test expects")
	}
	admin(t, strings.NewReplacer("{{S}}", q, "{{CHAN}}", quoteLiteral(s.channel)).Replace(oldFinish))

	s = openIn(t, schema)
	begin := time.Now()
	if err := s.CloseSession(t.Context(), "g", sess); err != nil {
		t.Fatalf("CloseSession after the upgrade: %v", err)
	}
	end := time.Now()
	cs, _, err := s.Changes(t.Context(), "g", snap.Version, 10)
	if err != nil || len(cs) != 2 {
		t.Fatalf("Changes = %+v, %v; want the session opened and closed", cs, err)
	}
	if !cs[0].At.IsZero() {
		t.Errorf("the entry written before the upgrade has At %v; want zero (unknown)", cs[0].At)
	}
	if at := cs[1].At; at.Before(begin.Add(-time.Second)) || at.After(end.Add(time.Second)) {
		t.Errorf("the entry written after the upgrade has At %v; want within [%v, %v]", at, begin, end)
	}
}

// A schema of version 2 whose functions of locks.go predate the current
// revision (claim_batch carries no comment, as before revision 3) gets
// them replaced by Open: here an older claim_batch that claims nothing. A
// read-only Open leaves them.
func TestOpenReplacesOlderLocks(t *testing.T) {
	requireServer(t)
	schema := newSchema(t)
	s := openIn(t, schema)
	sess, err := s.OpenSession(t.Context(), "g", "m", 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	q := `"` + schema + `"`
	admin(t, `CREATE OR REPLACE FUNCTION `+q+`.claim_batch(p_group text, p_session text, p_parts text[], p_limit integer)
RETURNS TABLE (r_ord bigint, r_status text, r_owner text, r_epoch text, r_member text, r_checkpoint bytea, r_given_back text)
LANGUAGE sql AS $$ SELECT 0::bigint, 'expired'::text, NULL::text, NULL::text, NULL::text, NULL::bytea, NULL::text $$`)
	admin(t, `COMMENT ON FUNCTION `+q+claimBatchSignature+` IS NULL`)

	// A read-only store, which calls none of them, opens it as it is.
	openIn(t, schema, WithReadOnly()).Close()
	s = openIn(t, schema)
	res, err := s.ClaimBatch(t.Context(), "g", sess, []string{"a"})
	if err != nil || res[0].Err != nil {
		t.Fatalf("ClaimBatch after Open = %+v, %v; want claimed by the replaced claim_batch", res, err)
	}
}

// A schema of locks revision 3 has a finish that notifies a batch of
// more than 32 entries by the group's name alone (readers read the
// table): Open replaces it with the one that sends the entries.
func TestOpenReplacesOlderFinish(t *testing.T) {
	requireServer(t)
	schema := newSchema(t)
	s := openIn(t, schema)
	channel := s.channel
	s.Close()
	q := `"` + schema + `"`
	admin(t, `CREATE OR REPLACE FUNCTION `+q+`.finish(g `+q+`.groups, p_seq bigint, p_tag bigint, p_limit integer) RETURNS void
LANGUAGE plpgsql AS $$ BEGIN
  IF p_seq = g.seq THEN RETURN; END IF;
  UPDATE `+q+`.groups SET seq = p_seq, tag = p_tag WHERE gid = g.gid;
  PERFORM pg_notify(`+quoteLiteral(channel)+`, g.name);
END $$`)
	admin(t, `COMMENT ON FUNCTION `+q+claimBatchSignature+` IS 'herd locks revision 3'`)

	s = openIn(t, schema)
	var def string
	if err := s.Pool().QueryRow(t.Context(), "SELECT pg_get_functiondef(to_regprocedure($1))",
		q+".finish("+q+".groups, bigint, bigint, integer)").Scan(&def); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(def, "v_notes") {
		t.Fatalf("after Open, finish is still the older one:\n%s", def)
	}
}
