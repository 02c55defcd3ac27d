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
// characters); Owner is base64 of little-endian int32s (the index in
// Sessions of the record's session, -1 if none) and Epoch of
// little-endian float64s (epochs are microseconds since 1970: below 2^53,
// so exact). Members' Owned is left 0: the page counts.
type wireState struct {
	Group      string            `json:"group"`
	Kind       string            `json:"kind"`
	Version    string            `json:"version"`
	Members    []memberState     `json:"members"`
	Sessions   []string          `json:"sessions"`
	Partitions string            `json:"partitions"`
	Owner      string            `json:"owner"`
	Epoch      string            `json:"epoch"`
	GivenBack  []givenBack       `json:"givenBack"`
	Malformed  []store.Malformed `json:"malformed"`
	N          int               `json:"n"`
	// ReadMs is how long the snapshot read took, for a state made of a
	// snapshot just read (0 for one the follower made of its copy).
	ReadMs int64 `json:"readMs"`
}

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
	owner, epoch := make([]byte, 4*n), make([]byte, 8*n)
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
		k, e := int32(-1), uint64(0)
		if o < len(snap.Owners) && snap.Owners[o].Partition == p.ID {
			rec := &snap.Owners[o]
			e = rec.Epoch
			if rec.GivenBack != "" && snap.Alive(rec.GivenBack) {
				w.GivenBack = append(w.GivenBack, givenBack{p.ID, rec.GivenBack})
			}
			switch s := rec.Session; {
			case s == "":
			case s == last:
				k = lastK
			default:
				var ok bool
				if k, ok = sessions[s]; !ok {
					k = int32(len(w.Sessions))
					sessions[s] = k
					w.Sessions = append(w.Sessions, s)
				}
				last, lastK = s, k
			}
		}
		binary.LittleEndian.PutUint32(owner[4*i:], uint32(k))
		binary.LittleEndian.PutUint64(epoch[8*i:], math.Float64bits(float64(e)))
	}
	w.Partitions = ids.String()
	w.Owner = base64.StdEncoding.EncodeToString(owner)
	w.Epoch = base64.StdEncoding.EncodeToString(epoch)
	return w
}
