package etcdstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/herdhq/herd/store"
)

// The log is the group's sequenced keys l/<seq>, each the entries of one
// sequencing up to seq, written with the sequence q, and its pending keys
// u/ after them (see pending.go). Changes reads q and the pending keys,
// and the sequenced keys after the reader's version if it is behind q, at
// one revision; when there are none it waits for the group's watch
// (watch.go) to see a new entry (or the end of a session's lease, to log an
// expiry when the cluster ends a lease) after that read. A reader the
// store's last read left at the log's head waits first. A watch that
// falls behind a compaction is made anew and the reader reads again: the
// entries are keys, which compaction keeps, so only a version whose entry
// was trimmed (or is of another history) is ErrVersionGone.

var (
	// errGone is a reader's version the log cannot continue.
	errGone = errors.New("gone")
	// errCompacted is a read of the sequenced keys at the revision of
	// the read of q that was compacted meanwhile: read again.
	errCompacted = errors.New("compacted")
)

// Changes implements store.Store.
func (s *Store) Changes(ctx context.Context, group string, after store.Version, max int) ([]store.Change, store.Version, error) {
	const op = "changes"
	if err := checkContext(ctx, op); err != nil {
		return nil, after, err
	}
	if err := store.ValidateChanges(group, max); err != nil {
		return nil, after, fmt.Errorf("etcdstore: %s: %w", op, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, after, failure(op, err)
	}
	g := s.groupKey(group)
	until := time.Now().Add(maxWait)
	w, err := s.watchLog(g)
	if err != nil {
		return nil, after, failure(op, err)
	}
	defer func() {
		if w != nil {
			s.unwatch(w)
		}
	}()
	// A reader that the store's last read left at the log's head reads
	// nothing until the watch sees an entry after that read.
	var rev int64
	read := true
	if h, ok := s.hintOf(g); ok && h.head && after == h.at && after.Seq > 0 {
		if from, ready := w.readyFrom(); ready && h.rev >= from {
			rev, read = h.rev, false
		}
	}
	for {
		if read {
			cs, r, err := s.readLog(ctx, g, after, max, w)
			switch {
			case errors.Is(err, errCompacted):
				continue
			case errors.Is(err, errGone):
				return nil, after, fmt.Errorf("etcdstore: %s after %v in group %q: %w", op, after, group, store.ErrVersionGone)
			case errors.Is(err, store.ErrCorrupt):
				return nil, after, fmt.Errorf("etcdstore: %s: %w", op, err)
			case err != nil:
				return nil, after, failure(op, err)
			case len(cs) > 0:
				return cs, cs[len(cs)-1].Version, nil
			}
			rev = r
		}
		read = true
		expired, err := w.wait(ctx, rev, after.Seq, until)
		switch {
		case errors.Is(err, rpctypes.ErrCompacted):
			// The watch fell behind a compaction: a new one, and read
			// again (the entries are keys, which compaction keeps).
			s.unwatch(w)
			w = nil
			nw, err := s.watchLog(g)
			if err != nil {
				return nil, after, failure(op, err)
			}
			w = nw
		case err != nil && errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil:
			return nil, after, nil // at rest until the caller's deadline
		case err != nil:
			return nil, after, failure(op, err)
		case time.Now().After(until):
			return nil, after, nil
		case expired:
			if _, err := s.expireDue(ctx, op, group); err != nil {
				return nil, after, err
			}
		}
	}
}

// readLog reads the entries after after (at most max) and the revision of
// the read; errGone if the log cannot continue from after. One
// transaction reads q, the pending keys, the values of those written since
// the store's last read of the group and not seen by w (the group's watch),
// and the sequenced keys from after's (see logHint): a reader woken by a
// write reads it in one round trip.
func (s *Store) readLog(ctx context.Context, g string, after store.Version, max int, w *logWatch) ([]store.Change, int64, error) {
	h, known := s.hintOf(g)
	seen, upTo := w.pendingValues()
	// The sequenced keys from the one holding after's entry, or from the
	// one after it when this store's last read left the reader at after
	// (see logHint).
	from, past := uint64(1), known && after == h.at && after.Seq > 0
	switch {
	case past:
		from = after.Seq + 1
	case after.Seq > 0:
		from = after.Seq
	}
	ops := []clientv3.Op{clientv3.OpGet(g + "q"), pendingGet(g),
		clientv3.OpGet(logKey(g, from), clientv3.WithRange(g+"l0"), clientv3.WithLimit(int64(max)+1))}
	if known {
		// The values of the pending keys written since the last read,
		// but for those the watch sent.
		from := h.rev
		if upTo > from {
			from = upTo
		}
		ops = append(ops, clientv3.OpGet(g+"u/", clientv3.WithPrefix(), clientv3.WithMinModRev(from+1)))
	}
	resp, err := s.c.Txn(withLeader(ctx)).Then(ops...).Commit()
	if err != nil {
		return nil, 0, err
	}
	rev := resp.Header.Revision
	qkv := resp.Responses[0].GetResponseRange().Kvs
	seq, err := decodeSeq(qkv)
	if err != nil {
		return nil, 0, err
	}
	values := seen
	if known {
		for _, kv := range resp.Responses[3].GetResponseRange().Kvs {
			values[string(kv.Key)] = kv.Value
		}
	}
	t, err := s.tailOf(ctx, g, seq, resp.Responses[1].GetResponseRange().Kvs, rev, true, values)
	if err != nil {
		return nil, 0, err
	}
	switch {
	case after == (store.Version{}):
		if seq.exists {
			return nil, 0, errGone
		}
		return nil, rev, nil
	case !seq.exists || t.head.Seq < after.Seq:
		return nil, 0, errGone
	case after.Seq >= seq.Seq && t.tagAt(after.Seq) != after.Tag:
		return nil, 0, errGone
	}
	create := qkv[0].CreateRevision
	cs := make([]store.Change, 0, min(max, int(t.head.Seq-after.Seq)))
	next := after.Seq + 1 // the seq of the entry the reader gets next
	if after.Seq < seq.Seq {
		kvs := resp.Responses[2].GetResponseRange().Kvs
		if past && create != h.create {
			// Another history since the last read: after's entry is to
			// be checked in its key.
			past = false
			if kvs, err = s.sequencedKeys(ctx, g, after, max, rev); err != nil {
				return nil, 0, err
			}
		}
		if cs, err = s.sequencedEntries(ctx, g, after, max, rev, seq.Seq, kvs, past); err != nil {
			return nil, 0, err
		}
		next += uint64(len(cs))
	}
	for ; len(cs) < max && next <= t.head.Seq; next++ {
		c, err := s.decodeEntry(ctx, g, []byte(g+"u/"), t.entries[next-seq.Seq-1], rev)
		if err != nil {
			return nil, 0, err
		}
		c.Version.Seq = next
		cs = append(cs, c)
	}
	at := after
	if len(cs) > 0 {
		at = cs[len(cs)-1].Version
	}
	s.setHint(g, logHint{rev: rev, create: create, at: at, head: at == t.head})
	return cs, rev, nil
}

// logKeyEntries decodes the sequenced log key kv of group key g (l/<seq>,
// the entries of one sequencing up to seq), the sequence being at last:
// its entries, and the seq of the first.
func logKeyEntries(g string, kv *mvccpb.KeyValue, last uint64) (es []entry, first uint64, _ error) {
	es, err := decodeEntries(kv.Value)
	if err != nil || len(es) == 0 {
		return nil, 0, fmt.Errorf("log key %q cannot be decoded: %v: %w", kv.Key, err, store.ErrCorrupt)
	}
	end, err := strconv.ParseUint(strings.TrimPrefix(string(kv.Key), g+"l/"), 10, 64)
	if err != nil || !bytes.HasPrefix(kv.Key, []byte(g+"l/")) || end < uint64(len(es)) || end > last {
		return nil, 0, fmt.Errorf("log key %q names no seq up to %d: %w", kv.Key, last, store.ErrCorrupt)
	}
	return es, end - uint64(len(es)) + 1, nil
}

// decodeEntry decodes a log entry read at rev, reading the set a
// PartitionsSet entry names at that revision (errGone if it is deleted).
func (s *Store) decodeEntry(ctx context.Context, g string, key, v []byte, rev int64) (store.Change, error) {
	e, err := decodeEntryJSON(v)
	if err != nil {
		return store.Change{}, fmt.Errorf("log entry in %q cannot be decoded: %v: %w", key, err, store.ErrCorrupt)
	}
	return s.changeOf(ctx, g, e, rev)
}

// changeOf is the change of the log entry e read at rev, reading the set a
// PartitionsSet entry names at that revision (errGone if it is deleted).
func (s *Store) changeOf(ctx context.Context, g string, e entry, rev int64) (store.Change, error) {
	c := store.Change{Version: store.Version{Tag: e.Tag}, Kind: e.Kind, Session: e.Session, Member: e.Member, Weight: e.Weight,
		Partition: e.Partition, Epoch: e.Epoch, GivenBack: e.GivenBack, Action: e.Action}
	if e.At > 0 { // absent (0) in an entry of an older herd: unknown
		c.At = time.UnixMicro(e.At).UTC()
	}
	switch e.Kind {
	case store.Claimed, store.Released, store.Restored:
		if e.Epoch == 0 || store.ValidateID("partition", e.Partition) != nil {
			return c, fmt.Errorf("log entry of a %v names epoch 0 or no valid partition: %w", e.Kind, store.ErrCorrupt)
		}
	}
	if e.Kind == store.Requested {
		if err := c.Request().Validate(); err != nil {
			return c, fmt.Errorf("log entry of a request cannot be decoded: %v: %w", err, store.ErrCorrupt)
		}
	}
	if e.Kind == store.LoadsReported {
		ls, err := changeLoads(e.Loads)
		c.Loads = ls
		return c, err
	}
	if e.Kind != store.PartitionsSet {
		return c, nil
	}
	if e.Set == "" {
		c.Partitions, _ = setPartitions(e.Parts) // a snapshot lists what it leaves out
		return c, nil
	}
	resp, err := s.c.Get(withLeader(ctx), setPrefix(g, e.Set), clientv3.WithPrefix(), clientv3.WithRev(rev))
	if err != nil {
		return c, err
	}
	if len(resp.Kvs) != e.Chunks {
		return c, errGone // replaced since: the reader takes a new snapshot
	}
	if c.Partitions, _, err = decodeSet(resp.Kvs); err != nil {
		return c, err
	}
	if c.Partitions == nil {
		c.Partitions = []store.Partition{}
	}
	return c, nil
}
