package etcdstore

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/herdhq/herd/store"
)

// loadChunk is the most loads one transaction of ReportLoads sets: one put
// each, beside the compare of the session and the log's operations, under
// etcd's default --max-txn-ops of 128. A report of more is several
// transactions, each with its own LoadsReported entry (at about 40 bytes a
// load, an entry is at most about 4 KB).
const loadChunk = 100

// loadPart is one load in a LoadsReported entry (its field "ls").
type loadPart struct {
	ID   string  `json:"i"`
	Load float64 `json:"l"` // encoding/json writes the shortest text that reads back as the same float64
}

// ReportLoads implements store.Store: per chunk of loadChunk loads, a read
// of the session's liveness key and the log's sequence, then a
// transaction that compares the session's liveness, puts each load (key
// o/<partition>, store.FormatLoad) and appends the chunk's entry.
func (s *Store) ReportLoads(ctx context.Context, group, session string, loads []store.Load) error {
	const op = "report loads"
	if err := checkContext(ctx, op); err != nil {
		return err
	}
	if err := store.ValidateReportLoads(group, session, loads); err != nil {
		return fmt.Errorf("etcdstore: %s: %w", op, err)
	}
	if err := ctx.Err(); err != nil {
		return failure(op, err)
	}
	g := s.groupKey(group)
	all := store.ReportChange(session, loads).Loads
	for from := 0; from < len(all); from += loadChunk {
		part := all[from:min(from+loadChunk, len(all))]
		err := retry(ctx, op, func() (bool, error) {
			resp, err := s.c.Txn(withLeader(ctx)).Then(clientv3.OpGet(g+"s/"+session, clientv3.WithKeysOnly()), clientv3.OpGet(g+"q")).Commit()
			if err != nil {
				return false, failure(op, err)
			}
			kvs := resp.Responses[0].GetResponseRange().Kvs
			if len(kvs) == 0 {
				return false, fmt.Errorf("etcdstore: %s by session %q: %w", op, session, store.ErrSessionExpired)
			}
			w := &write{g: g, group: group, seq: seqOf(resp.Responses[1].GetResponseRange().Kvs)}
			w.alive(session, kvs[0].CreateRevision)
			for _, l := range part {
				w.put(g+"o/"+l.Partition, store.FormatLoad(l.Load))
			}
			w.append(store.Change{Kind: store.LoadsReported, Session: session, Loads: part})
			ok, err := s.commit(ctx, w)
			if err != nil {
				return false, failure(op, err)
			}
			return ok, nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// entryLoads is the "ls" of c's entry.
func entryLoads(c store.Change) []loadPart {
	if len(c.Loads) == 0 {
		return nil
	}
	ls := make([]loadPart, len(c.Loads))
	for i, l := range c.Loads {
		ls[i] = loadPart{ID: l.Partition, Load: l.Load}
	}
	return ls
}

// changeLoads decodes the "ls" of a LoadsReported entry.
func changeLoads(ls []loadPart) ([]store.Load, error) {
	out := make([]store.Load, len(ls))
	for i, l := range ls {
		out[i] = store.Load{Partition: l.ID, Load: l.Load}
	}
	store.SortLoads(out)
	if err := store.ValidateLoads(out); err != nil {
		return nil, fmt.Errorf("log entry of a load report cannot be decoded: %v: %w", err, store.ErrCorrupt)
	}
	return out, nil
}
