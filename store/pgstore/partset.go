package pgstore

import (
	"context"
	"fmt"

	"github.com/herdhq/herd/store"
)

// setPartitionsSQL is set_partition_set, the rule of store.DecideSet in
// one function: the kind is checked (and taken) and the digest compared
// under the group's lock; with p_full false and a set to write, it answers
// status need, and the caller sends the set whole.
const setPartitionsSQL = `CREATE OR REPLACE FUNCTION {{S}}.set_partition_set(p_group text, p_kind text, p_mode text, p_digest text, p_full boolean,
  p_ids text[], p_weights integer[], p_limit integer, OUT r_status text, OUT r_kind text, OUT r_stored boolean, OUT r_what text)
LANGUAGE plpgsql AS $$
DECLARE g {{S}}.groups; v_seq bigint; v_tag bigint;
BEGIN
  g := {{S}}.lock_group(p_group, true);
  r_status := 'ok'; r_kind := g.kind; r_stored := g.partset; r_what := '';
  IF p_kind <> '' AND g.kind <> '' AND g.kind <> p_kind THEN r_status := 'kind'; RETURN; END IF;
  IF g.kind = '' AND p_kind <> '' THEN
    UPDATE {{S}}.groups SET kind = p_kind WHERE gid = g.gid;
    r_kind := p_kind;
  END IF;
  IF p_mode = 'kindonly' THEN RETURN; END IF;
  IF g.partset AND g.digest = p_digest THEN r_what := 'same'; RETURN; END IF;
  IF g.partset AND p_mode = 'ifabsent' THEN r_what := 'kept'; RETURN; END IF;
  IF NOT p_full THEN r_status := 'need'; RETURN; END IF;
  DELETE FROM {{S}}.partitions WHERE gid = g.gid;
  INSERT INTO {{S}}.partitions (gid, id, weight) SELECT g.gid, u.i, u.w FROM unnest(p_ids, p_weights) AS u(i, w);
  UPDATE {{S}}.groups SET partset = true, digest = p_digest WHERE gid = g.gid;
  v_seq := g.seq + 1;
  v_tag := {{S}}.new_tag();
  INSERT INTO {{S}}.log (gid, seq, tag, kind, part_ids, part_weights) VALUES (g.gid, v_seq, v_tag, 7, p_ids, p_weights);
  PERFORM {{S}}.finish(g, v_seq, v_tag, p_limit);
  r_stored := true;
  r_what := CASE WHEN g.partset THEN 'replaced' ELSE 'written' END;
END $$;
`

// upgradeV1SQL brings a schema of version 1 to version 2: the group's kind
// and the digest of its set. set_partitions, which members of version 1
// still running call, is replaced by one that also clears the digest, so
// that a set they write is never taken for the one whose digest was kept.
const upgradeV1SQL = `
ALTER TABLE {{S}}.groups ADD COLUMN IF NOT EXISTS kind text NOT NULL DEFAULT '',
  ADD COLUMN IF NOT EXISTS digest text NOT NULL DEFAULT '';
CREATE OR REPLACE FUNCTION {{S}}.set_partitions(p_group text, p_ids text[], p_weights integer[], p_limit integer) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE g {{S}}.groups; v_seq bigint; v_tag bigint;
BEGIN
  g := {{S}}.lock_group(p_group, true);
  DELETE FROM {{S}}.partitions WHERE gid = g.gid;
  INSERT INTO {{S}}.partitions (gid, id, weight) SELECT g.gid, u.i, u.w FROM unnest(p_ids, p_weights) AS u(i, w);
  UPDATE {{S}}.groups SET partset = true, digest = '' WHERE gid = g.gid;
  v_seq := g.seq + 1;
  v_tag := {{S}}.new_tag();
  INSERT INTO {{S}}.log (gid, seq, tag, kind, part_ids, part_weights) VALUES (g.gid, v_seq, v_tag, 7, p_ids, p_weights);
  PERFORM {{S}}.finish(g, v_seq, v_tag, p_limit);
END $$;
{{SETPARTITIONS}}
`

// SetPartitions implements store.Store: the function set_partitions
// applies store.DecideSet's rule, sent the digest first (store.SendSet).
func (s *Store) SetPartitions(ctx context.Context, group string, ps store.PartitionSet) (store.SetResult, error) {
	if err := s.begin(ctx, "SetPartitions", store.ValidateSetPartitions(group, ps)); err != nil {
		return store.SetResult{}, err
	}
	if ps.Mode != store.SetKindOnly {
		for _, p := range ps.Partitions {
			if p.Weight > 1<<31-1 {
				return store.SetResult{}, fmt.Errorf("pgstore: SetPartitions: partition %q has weight %d, more than 2^31-1: %w", p.ID, p.Weight, store.ErrInvalid)
			}
		}
	}
	return store.SendSet("pgstore: SetPartitions", group, ps, func(step store.SetStep) (store.SetReply, error) {
		var rep store.SetReply
		sendIDs, sendWeights := []string{}, []int32{}
		if step.Full {
			sendIDs, sendWeights = make([]string, len(ps.Partitions)), make([]int32, len(ps.Partitions))
			for i, p := range ps.Partitions {
				sendIDs[i], sendWeights[i] = p.ID, int32(p.Weight)
			}
		}
		err := s.queryRow(ctx, "SetPartitions", s.q.setPartitions,
			[]any{group, ps.Kind, step.Mode, step.Digest, step.Full, sendIDs, sendWeights, int32(s.cfg.logLimit)},
			&rep.Status, &rep.Kind, &rep.Stored, &rep.What)
		return rep, err
	})
}
