package jobs

import (
	"context"
	"errors"
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
	// Record is the key's record, nil if it never ran (or the store cannot
	// read records, see ErrRecordsUnavailable). Err says why a record that
	// exists could not be decoded (Record is then nil).
	Record *Record
	Err    error
	// Age is how long ago, on the store's clock, the record was last
	// written; 0 if unknown.
	Age time.Duration
}

// ErrRecordsUnavailable: the store cannot read records without claiming
// them (it has no Records method), so the blackboard shows owners only.
var ErrRecordsUnavailable = errors.New("jobs: the store cannot read records for views (no Records method); showing owners only")

// Blackboard reads a jobs group: every key of its partition set, sorted,
// with its owner and its record. It changes nothing. A record that cannot
// be decoded is reported in its key's Err and does not stop the read. If
// the store cannot read records (ErrRecordsUnavailable), the keys and
// owners are returned with that error.
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
	read := recordsReader(st)
	if read == nil {
		return out, ErrRecordsUnavailable
	}
	for start := 0; start < len(keys); start += store.MaxBatch {
		batch := keys[start:min(start+store.MaxBatch, len(keys))]
		rs, err := read(ctx, group, batch)
		if err != nil {
			return nil, fmt.Errorf("jobs: blackboard of %q: reading records: %w", group, err)
		}
		for _, r := range rs {
			i, ok := idx[r.partition]
			if !ok || len(r.checkpoint) == 0 {
				continue
			}
			out[i].Age = r.age
			rec, err := DecodeRecord(r.checkpoint)
			if err != nil {
				out[i].Err = err
				continue
			}
			out[i].Record = &rec
		}
	}
	return out, nil
}

// viewRecord is what the blackboard uses of a store's record.
type viewRecord struct {
	partition  string
	checkpoint []byte
	age        time.Duration
}

// recordsReader returns a function reading records through st's Records
// method, or nil if st has none.
//
// Records (store.Store.Records, its record type store.Record) is being
// added to the store contract for views such as this one. Until it is in
// every store, the method is found and called by reflection, by its shape:
// Records(ctx, group string, partitions []string) ([]R, error), where R has
// the fields Partition string, Checkpoint []byte and CheckpointAge
// time.Duration (promoted from an embedded struct or not). Once the
// contract has it, this is a plain call of st.Records.
func recordsReader(st store.Store) func(ctx context.Context, group string, partitions []string) ([]viewRecord, error) {
	m := reflect.ValueOf(st).MethodByName("Records")
	if !m.IsValid() {
		return nil
	}
	t := m.Type()
	ctxType := reflect.TypeFor[context.Context]()
	errType := reflect.TypeFor[error]()
	if t.NumIn() != 3 || t.In(0) != ctxType || t.In(1).Kind() != reflect.String || t.In(2) != reflect.TypeFor[[]string]() ||
		t.NumOut() != 2 || t.Out(0).Kind() != reflect.Slice || t.Out(1) != errType {
		return nil
	}
	elem := t.Out(0).Elem()
	if elem.Kind() != reflect.Struct {
		return nil
	}
	for name, want := range map[string]reflect.Type{
		"Partition":     reflect.TypeFor[string](),
		"Checkpoint":    reflect.TypeFor[[]byte](),
		"CheckpointAge": reflect.TypeFor[time.Duration](),
	} {
		if f, ok := elem.FieldByName(name); !ok || f.Type != want {
			return nil
		}
	}
	return func(ctx context.Context, group string, partitions []string) ([]viewRecord, error) {
		outs := m.Call([]reflect.Value{reflect.ValueOf(ctx), reflect.ValueOf(group), reflect.ValueOf(partitions)})
		if err, _ := outs[1].Interface().(error); err != nil {
			return nil, err
		}
		rs := outs[0]
		vs := make([]viewRecord, rs.Len())
		for i := range vs {
			r := rs.Index(i)
			vs[i] = viewRecord{
				partition:  r.FieldByName("Partition").String(),
				checkpoint: r.FieldByName("Checkpoint").Bytes(),
				age:        time.Duration(r.FieldByName("CheckpointAge").Int()),
			}
		}
		return vs, nil
	}
}
