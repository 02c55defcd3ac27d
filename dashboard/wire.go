package dashboard

import (
	"encoding/base64"
	"encoding/binary"
	"math"
	"strings"

	"github.com/herdhq/herd/store"
)

// wireState is the "state" event: the group with its columns packed so
// that a page decodes 100,000 partitions in milliseconds. Partitions are
// one string, the ids joined by newlines (ids hold no control
// characters). Each partition's owner and epoch are a slot: the records
// of one claim batch share both (a batch's epoch is the store's time of
// the batch), so a group has few distinct pairs, and each is sent once.
// Slot is then base64 of little-endian uint16s, one per partition, the
// index of its pair in SlotOwner (base64 of little-endian int32s: the
// index in Sessions of the record's session, -1 if none) and SlotEpoch
// (base64 of little-endian float64s: epochs are microseconds since 1970,
// below 2^53, so exact; 0 without a record), and SlotBytes is 2. A group
// with more pairs than a quarter of its partitions, or than 65,536, has
// SlotBytes 0, no Slot, and one pair per partition in SlotOwner and
// SlotEpoch. 100,000 partitions placed in batches of 1,000 are 1.1 MB
// with 6-character ids (BenchmarkStateEvent), against 2.4 MB with a pair
// per partition. Members' Owned is left 0: the page counts.
type wireState struct {
	Group      string            `json:"group"`
	Kind       string            `json:"kind"`
	Version    string            `json:"version"`
	Members    []memberState     `json:"members"`
	Sessions   []string          `json:"sessions"`
	Partitions string            `json:"partitions"`
	Slot       string            `json:"slot"`
	SlotBytes  int               `json:"slotBytes"`
	SlotOwner  string            `json:"slotOwner"`
	SlotEpoch  string            `json:"slotEpoch"`
	GivenBack  []givenBack       `json:"givenBack"`
	Malformed  []store.Malformed `json:"malformed"`
	N          int               `json:"n"`
	// ReadMs is how long the snapshot read took, for a state made of a
	// snapshot just read (0 for one the follower made of its copy).
	ReadMs int64 `json:"readMs"`
}

// slotKey is a partition's owner (index in Sessions, -1 if none) and
// epoch.
type slotKey struct {
	owner int32
	epoch uint64
}

// maxSlots bounds the distinct pairs sent as slots.
const maxSlots = 1 << 16

// newWireState packs snap (which it does not change) for the event
// stream, in one pass over its partitions and records: it is what the
// first page of a group waits for after the group's read.
func newWireState(group string, snap *store.Snapshot) *wireState {
	n := len(snap.Partitions)
	w := &wireState{Group: group, Kind: snap.Kind, Version: snap.Version.String(), Members: members(snap),
		Sessions: []string{}, GivenBack: []givenBack{}, Malformed: snap.Malformed, N: n}
	if w.Malformed == nil {
		w.Malformed = []store.Malformed{}
	}
	size := n
	for _, p := range snap.Partitions {
		size += len(p.ID)
	}
	var ids strings.Builder
	ids.Grow(size)
	keys := make([]slotKey, n)
	sessions := map[string]int32{}
	// The records of one session follow each other often: the last
	// session's index saves most lookups.
	last, lastK := "", int32(-1)
	o := 0 // Owners and Partitions are both sorted by id: walk them together
	for i, p := range snap.Partitions {
		if i > 0 {
			ids.WriteByte('\n')
		}
		ids.WriteString(p.ID)
		for o < len(snap.Owners) && snap.Owners[o].Partition < p.ID {
			o++
		}
		key := slotKey{-1, 0}
		if o < len(snap.Owners) && snap.Owners[o].Partition == p.ID {
			rec := &snap.Owners[o]
			key.epoch = rec.Epoch
			if rec.GivenBack != "" && snap.Alive(rec.GivenBack) {
				w.GivenBack = append(w.GivenBack, givenBack{p.ID, rec.GivenBack})
			}
			switch s := rec.Session; {
			case s == "":
			case s == last:
				key.owner = lastK
			default:
				k, ok := sessions[s]
				if !ok {
					k = int32(len(w.Sessions))
					sessions[s] = k
					w.Sessions = append(w.Sessions, s)
				}
				last, lastK, key.owner = s, k, k
			}
		}
		keys[i] = key
	}
	w.Partitions = ids.String()
	w.packSlots(keys)
	return w
}

// packSlots sets the owner and epoch columns of keys, one per partition:
// as slots if there are few distinct pairs, else a pair per partition.
func (w *wireState) packSlots(keys []slotKey) {
	slot := make([]byte, 2*len(keys))
	slots := []slotKey{}
	index := map[slotKey]int{}
	limit := min(len(keys)/4, maxSlots)
	last, lastJ := slotKey{-2, 0}, 0
	for i, key := range keys {
		if key != last {
			j, ok := index[key]
			if !ok {
				if len(slots) == limit {
					slots, slot = keys, nil // too many: a pair per partition
					break
				}
				j = len(slots)
				index[key] = j
				slots = append(slots, key)
			}
			last, lastJ = key, j
		}
		binary.LittleEndian.PutUint16(slot[2*i:], uint16(lastJ))
	}
	if slot != nil {
		w.Slot, w.SlotBytes = base64.StdEncoding.EncodeToString(slot), 2
	}
	owner, epoch := make([]byte, 4*len(slots)), make([]byte, 8*len(slots))
	for j, k := range slots {
		binary.LittleEndian.PutUint32(owner[4*j:], uint32(k.owner))
		binary.LittleEndian.PutUint64(epoch[8*j:], math.Float64bits(float64(k.epoch)))
	}
	w.SlotOwner = base64.StdEncoding.EncodeToString(owner)
	w.SlotEpoch = base64.StdEncoding.EncodeToString(epoch)
}
