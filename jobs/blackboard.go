package jobs

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/herdhq/herd/store"
)

// KeyStatus is one key's line on the blackboard: who owns it now and its
// record.
type KeyStatus struct {
	Key string
	// Owner is the member that owns the key now, "" if none (no member
	// alive, or between owners); Epoch is its epoch.
	Owner string
	Epoch uint64
	// Record is the key's record, nil if it never ran. Err says why a
	// record that exists could not be decoded (Record is then nil).
	Record *Record
	Err    error
	// Age is how long ago, on the store's clock, the record was last
	// written; 0 if unknown.
	Age time.Duration
}

// Blackboard reads a jobs group: every key of its partition set, sorted,
// with its owner and its record. It reads the group's snapshot (keys,
// owners, live sessions), then the records with the store's Records read,
// at most store.MaxBatch at a time; it changes nothing. A record that
// cannot be decoded is reported in its key's Err and does not stop the
// read.
func Blackboard(ctx context.Context, st store.Store, group string) ([]KeyStatus, error) {
	if ctx == nil || st == nil {
		return nil, fmt.Errorf("jobs: blackboard: nil context or store: %w", store.ErrInvalid)
	}
	if v := reflect.ValueOf(st); v.Kind() == reflect.Pointer && v.IsNil() {
		return nil, fmt.Errorf("jobs: blackboard: the store is a nil %T: %w", st, store.ErrInvalid)
	}
	if err := store.ValidateID("group", group); err != nil {
		return nil, fmt.Errorf("jobs: blackboard: %w", err)
	}
	snap, err := st.Snapshot(ctx, group)
	if err != nil {
		return nil, fmt.Errorf("jobs: blackboard of %q: %w", group, err)
	}
	out := make([]KeyStatus, len(snap.Partitions))
	idx := make(map[string]int, len(snap.Partitions))
	keys := make([]string, len(snap.Partitions))
	for i, p := range snap.Partitions {
		out[i].Key, keys[i], idx[p.ID] = p.ID, p.ID, i
	}
	for _, o := range snap.Owners {
		if i, ok := idx[o.Partition]; ok && o.Session != "" && snap.Alive(o.Session) {
			out[i].Owner, out[i].Epoch = o.Member, o.Epoch
		}
	}
	for start := 0; start < len(keys); start += store.MaxBatch {
		batch := keys[start:min(start+store.MaxBatch, len(keys))]
		rs, err := st.Records(ctx, group, batch)
		if err != nil {
			return nil, fmt.Errorf("jobs: blackboard of %q: reading records: %w", group, err)
		}
		for _, r := range rs {
			i, ok := idx[r.Partition]
			if !ok || len(r.Checkpoint) == 0 {
				continue
			}
			out[i].Age = r.CheckpointAge
			rec, err := DecodeRecord(r.Checkpoint)
			if err != nil {
				out[i].Err = err
				continue
			}
			out[i].Record = &rec
		}
	}
	return out, nil
}
