package etcdstore

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/herdhq/herd/store"
)

// The values herd writes, as JSON (short field names: every claim writes
// a record and a log entry).

// seqState is the group's log sequence as read: the last entry's seq and
// tag, and the key's revision, which a logging write compares.
type seqState struct {
	exists bool
	rev    int64
	Seq    uint64 `json:"q"`
	Tag    uint64 `json:"t"`
}

func decodeSeq(kvs []*mvccpb.KeyValue) (seqState, error) {
	if len(kvs) == 0 {
		return seqState{}, nil
	}
	st := seqState{exists: true, rev: kvs[0].ModRevision}
	if err := json.Unmarshal(kvs[0].Value, &st); err != nil {
		return st, fmt.Errorf("the group's log sequence %q cannot be decoded: %v: %w", kvs[0].Key, err, store.ErrCorrupt)
	}
	return st, nil
}

func (st seqState) version() store.Version { return store.Version{Seq: st.Seq, Tag: st.Tag} }

// seqOf is the sequence a decision read (nil if it cannot be decoded: the
// write then logs its entries pending, and readers report the key).
func seqOf(kvs []*mvccpb.KeyValue) *seqState {
	st, err := decodeSeq(kvs)
	if err != nil {
		return nil
	}
	return &st
}

// sessionInfo is a session as logged (key m/).
type sessionInfo struct {
	Member string           `json:"m"`
	Weight int              `json:"w,omitempty"`
	TTL    time.Duration    `json:"t"`
	Lease  clientv3.LeaseID `json:"l"`
}

// record is a partition's ownership record (key r/); its checkpoint is
// in a key of its own (c/), so that a claim does not rewrite it.
type record struct {
	Session   string `json:"s,omitempty"`
	Member    string `json:"m,omitempty"`
	Epoch     uint64 `json:"e"`
	GivenBack string `json:"g,omitempty"`
	Since     int64  `json:"t,omitempty"` // when it got its epoch, µs since 1970 on the writer's clock
}

func decodeRecord(kv *mvccpb.KeyValue) (record, error) {
	var r record
	if err := json.Unmarshal(kv.Value, &r); err != nil {
		return r, fmt.Errorf("ownership record %q cannot be decoded: %v: %w", kv.Key, err, store.ErrCorrupt)
	}
	if r.Epoch == 0 {
		return r, fmt.Errorf("ownership record %q has epoch 0: %w", kv.Key, store.ErrCorrupt)
	}
	return r, nil
}

// A checkpoint (key c/) is the time it was written (8 bytes, µs) and the
// value.
func encodeCheckpoint(at time.Time, value []byte) string {
	b := make([]byte, 8, 8+len(value))
	binary.BigEndian.PutUint64(b, uint64(at.UnixMicro()))
	return string(append(b, value...))
}

func decodeCheckpoint(v []byte) (at time.Time, value []byte, ok bool) {
	if len(v) < 8 {
		return time.Time{}, nil, false
	}
	return time.UnixMicro(int64(binary.BigEndian.Uint64(v))), v[8:], true
}

// meta is the group's kind and partition set (key k).
type meta struct {
	Kind   string `json:"kind,omitempty"`
	Stored bool   `json:"stored,omitempty"`
	Digest string `json:"digest,omitempty"`
	Set    string `json:"set,omitempty"` // the chunks are p/<Set>/<n>
	Chunks int    `json:"n,omitempty"`
}

// entry is a log entry (key l/<seq>). A PartitionsSet entry names the set's
// chunks instead of carrying the set.
type entry struct {
	Kind      store.ChangeKind `json:"k"`
	Session   string           `json:"s,omitempty"`
	Member    string           `json:"m,omitempty"`
	Weight    int              `json:"w,omitempty"`
	Partition string           `json:"p,omitempty"`
	Epoch     uint64           `json:"e,omitempty"`
	GivenBack string           `json:"g,omitempty"`
	Action    string           `json:"a,omitempty"` // a Requested entry's
	Set       string           `json:"set,omitempty"`
	Chunks    int              `json:"n,omitempty"`
	Parts     []setPart        `json:"ps,omitempty"` // a small set, in the entry
	Loads     []loadPart       `json:"ls,omitempty"` // a LoadsReported entry's (loads.go)
	// At: the writing process's clock in µs when it committed the entry
	// (etcd gives no server time); absent in an entry of an older herd,
	// whose readers ignore it.
	At  int64  `json:"at,omitempty"`
	Tag uint64 `json:"t,omitempty"`
}

// entryOf is the entry of c, written at at (the writer's clock).
func entryOf(c store.Change, at time.Time) entry {
	e := entry{Kind: c.Kind, Session: c.Session, Member: c.Member, Weight: c.Weight, Partition: c.Partition,
		Epoch: c.Epoch, GivenBack: c.GivenBack, Action: c.Action, Loads: entryLoads(c), At: at.UnixMicro()}
	for _, p := range c.Partitions {
		e.Parts = append(e.Parts, setPart{ID: p.ID, Weight: p.Weight})
	}
	return e
}

// chain tags the entry e (JSON, without a tag, as a pending key holds
// it) as the entry after the one tagged prev, and returns it with its tag:
// the tag hashes prev and the entry, so that a log that went on
// differently from an earlier entry (a cluster restored from an older
// snapshot) never gives a reader's version again with other contents.
func chain(prev uint64, e []byte) (json.RawMessage, uint64) {
	h := fnv.New64a()
	var p [8]byte
	binary.BigEndian.PutUint64(p[:], prev)
	h.Write(p[:])
	h.Write(e)
	tag := h.Sum64() | 1 // never 0, the zero version's
	// e is an object with its kind at least: the tag is its last field.
	v := make([]byte, 0, len(e)+24)
	v = append(v, e[:len(e)-1]...)
	v = append(v, `,"t":`...)
	v = strconv.AppendUint(v, tag, 10)
	return append(v, '}'), tag
}

// newTag is the tag before the first entry of a new history.
func newTag() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.BigEndian.Uint64(b[:]) | 1
}

// setChunk is one chunk of a partition set (key p/<set>/<n>).
type setPart struct {
	ID     string `json:"i"`
	Weight int    `json:"w,omitempty"`
}

// chunkSet encodes ps into chunks of at most about size bytes each.
func chunkSet(ps []store.Partition, size int) []string {
	var chunks []string
	var cur []setPart
	n := 0
	flush := func() {
		b, _ := json.Marshal(cur)
		chunks = append(chunks, string(b))
		cur, n = cur[:0], 0
	}
	for _, p := range ps {
		cur = append(cur, setPart{ID: p.ID, Weight: p.Weight})
		n += len(p.ID) + 16
		if n >= size {
			flush()
		}
	}
	if len(cur) > 0 || len(chunks) == 0 {
		flush()
	}
	return chunks
}

// decodeSet decodes the chunks of a set, in key order; a chunk that is not
// a list of entries fails the whole set (see setPartitions for entries).
func decodeSet(kvs []*mvccpb.KeyValue) (ps []store.Partition, bad []store.Malformed, _ error) {
	var parts []setPart
	for _, kv := range kvs {
		var chunk []setPart
		if err := json.Unmarshal(kv.Value, &chunk); err != nil {
			return nil, nil, fmt.Errorf("partition set chunk %q cannot be decoded: %v: %w", kv.Key, err, store.ErrCorrupt)
		}
		parts = append(parts, chunk...)
	}
	ps, bad = setPartitions(parts)
	return ps, bad, nil
}

// setPartitions is the partition set of parts, sorted by id. An entry
// herd never writes (an id ValidateID refuses, a negative weight, an id
// listed twice: a set written by something else) is left out and listed
// in bad.
func setPartitions(parts []setPart) (ps []store.Partition, bad []store.Malformed) {
	ps = make([]store.Partition, 0, len(parts))
	for _, p := range parts {
		err := store.ValidateID("partition", p.ID)
		if err == nil && p.Weight < 0 {
			err = fmt.Errorf("weight %d is negative", p.Weight)
		}
		if err != nil {
			bad = append(bad, store.Malformed{Kind: store.MalformedPartition, ID: p.ID, Reason: err.Error()})
			continue
		}
		ps = append(ps, store.Partition{ID: p.ID, Weight: p.Weight})
	}
	slices.SortStableFunc(ps, func(a, b store.Partition) int { return strings.Compare(a.ID, b.ID) })
	n := 0
	for i, p := range ps {
		if i > 0 && p.ID == ps[n-1].ID {
			bad = append(bad, store.Malformed{Kind: store.MalformedPartition, ID: p.ID, Reason: "listed more than once in the set"})
			continue
		}
		ps[n] = p
		n++
	}
	return ps[:n], bad
}

// ownerOf is the ownership record kv of partition id as a snapshot lists
// it: an error (the record is listed as malformed) if it does not decode
// or names what herd never writes.
func ownerOf(id string, kv *mvccpb.KeyValue) (store.Ownership, error) {
	r, err := decodeRecord(kv)
	if err != nil {
		return store.Ownership{}, err
	}
	o := store.Ownership{Partition: id, Session: r.Session, Member: r.Member, Epoch: r.Epoch, GivenBack: r.GivenBack}
	if err := store.CheckOwnership(o); err != nil {
		return store.Ownership{}, fmt.Errorf("ownership record %q: %v: %w", kv.Key, err, store.ErrCorrupt)
	}
	return o, nil
}

// sessionOf is the member record kv of session id (key m/): an error (the
// session is listed as malformed) if it does not decode or names what herd
// never writes.
func sessionOf(id string, kv *mvccpb.KeyValue) (sessionInfo, error) {
	var info sessionInfo
	if err := json.Unmarshal(kv.Value, &info); err != nil {
		return info, err
	}
	if err := store.CheckSession(id, info.Member); err != nil {
		return info, err
	}
	if info.Weight < 0 || info.TTL < 0 {
		return info, fmt.Errorf("weight %d or TTL %s is negative", info.Weight, info.TTL)
	}
	return info, nil
}

func setPrefix(g, set string) string       { return g + "p/" + set + "/" }
func chunkKey(g, set string, i int) string { return fmt.Sprintf("%s%06d", setPrefix(g, set), i) }

func mustJSON(v any) string {
	b, _ := json.Marshal(v) // herd's own structs of strings and numbers: no error
	return string(b)
}
