package redisstore

// Decoding a group's read into a store.Snapshot, and the records' fields.

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/herdhq/herd/internal/idindex"
	"github.com/herdhq/herd/store"
)

// decodeSnapshot decodes what Snapshot read. A record that does not decode
// (written by hand, by another program or version) is left out and listed
// in Snapshot.Malformed: one bad record never fails the whole read.
func decodeSnapshot(k keys, r groupRead) (*store.Snapshot, error) {
	now := r.now.UnixMicro()
	metas := r.metas
	// The GivenBack marks (see mark).
	var marks map[string]string
	if len(r.marks) > 0 {
		marks = make(map[string]string, len(r.marks))
		for p, v := range r.marks {
			if m := mark(v); m != "" {
				marks[p] = m
			}
		}
	}

	snap := &store.Snapshot{
		Sessions:   make([]store.SessionInfo, 0, len(r.live)),
		Partitions: make([]store.Partition, 0, len(r.parts)),
	}
	bad := func(kind, key, id, format string, args ...any) {
		snap.Malformed = append(snap.Malformed, store.BadRecord(kind, id, fmt.Sprintf("key %q: ", key)+fmt.Sprintf(format, args...)))
	}
	for _, z := range r.live {
		id, _ := z.Member.(string)
		exp := z.Score
		if !store.IsSessionID(id) {
			// Written by hand or by another program: a session no member
			// opened would be given partitions it never claims.
			bad(store.MalformedSession, k.sessions, id, "not a session id this store makes (26 characters of A-Z, 2-7)")
			continue
		}
		m, ok := metas[id]
		if !ok {
			bad(store.MalformedSession, k.members, id, "live session has no member record")
			continue
		}
		weight, member, ok := parseMeta(m)
		if !ok {
			bad(store.MalformedSession, k.members, id, "value %q is not <weight>:<member>", abbrev(m))
			continue
		}
		if err := store.ValidateID("member", member); err != nil {
			bad(store.MalformedSession, k.members, id, "%v", err)
			continue
		}
		// Expired between the prune and the read (see Snapshot): none left.
		left := time.Duration(0)
		if us := exp - float64(now); us >= float64(math.MaxInt64/int64(time.Microsecond)) {
			left = time.Duration(math.MaxInt64)
		} else if us > 0 {
			left = time.Duration(us) * time.Microsecond
		}
		snap.Sessions = append(snap.Sessions, store.SessionInfo{
			ID:        id,
			Member:    member,
			Remaining: left,
			Weight:    weight,
		})
	}
	// A non-empty hash is a stored set even without partset (written by a
	// version before partset existed).
	snap.PartitionSetStored = r.partset || len(r.parts) > 0 || len(r.list) > 0
	snap.Kind = r.kind
	if r.listed {
		snap.Partitions = r.list // sorted, checked
	}
	// A version key this store did not write reads as no log: the next
	// write starts a new history.
	snap.Version, _ = parseVersion(r.version)
	snap.Loads = decodeLoads(r.loads)
	for p, w := range r.parts {
		if err := store.ValidateID("partition", p); err != nil {
			bad(store.MalformedPartition, k.partitions, p, "%v", err)
			continue
		}
		weight, err := strconv.Atoi(w)
		if err != nil || weight < 0 || !allDigits(w) {
			bad(store.MalformedPartition, k.partitions, p, "weight %q is not a non-negative integer", abbrev(w))
			continue
		}
		snap.Partitions = append(snap.Partitions, store.Partition{ID: p, Weight: weight})
	}
	slices.SortFunc(snap.Sessions, func(a, b store.SessionInfo) int { return strings.Compare(a.ID, b.ID) })
	if !r.listed {
		slices.SortFunc(snap.Partitions, func(a, b store.Partition) int { return strings.Compare(a.ID, b.ID) })
	}
	owners, err := decodeOwners(k, r.owners, snap.Partitions, marks, bad)
	if err != nil {
		return nil, err
	}
	snap.Owners = owners
	store.SortMalformed(snap.Malformed)
	return snap, nil
}

// decodeOwners returns the records of owners (the raw reply of HGETALL on
// the owners hash), sorted by partition, with the GivenBack marks, and
// reports through bad those that do not decode. parts is the partition set,
// sorted by id.
//
// The reply is read once, in the server's order, each value decoded to its
// epoch and holder and put at the position of its partition in parts,
// found through an index of parts; the records are then made in the order
// of parts. Sorting 100,000 records by partition was a third of the
// client's CPU time of a Snapshot (BenchmarkSnapshot100k). A record's
// Partition is the set's own string, and its Session and Member are shared
// by every record of the same holder: nothing is kept of the reply. Only
// the records of partitions outside the set (left by a set that shrank)
// are sorted, and merged in.
func decodeOwners(k keys, owners hashReply, parts []store.Partition, marks map[string]string, bad func(kind, key, id, format string, args ...any)) ([]store.Ownership, error) {
	hc := holderCache{ids: map[string]int32{}}
	decode := func(p string, v []byte) (uint64, int32) { return hc.decode(k, p, v, bad) }
	record := func(p string, epoch uint64, h int32) store.Ownership {
		return store.Ownership{Partition: p, Session: hc.hs[h].session, Member: hc.hs[h].member, Epoch: epoch, GivenBack: marks[p]}
	}
	// at[i]: the record of parts[i], if holder > 0 (the holder's index
	// plus one).
	type slot struct {
		epoch  uint64
		holder int32
	}
	// The index and the slots only for a group with records: each member
	// of a fleet reads the group before its first placement, when it has
	// none, and the index of 100,000 partitions would serve no lookup.
	var at []slot
	var index idindex.Index
	if owners.len() > 0 {
		at = make([]slot, len(parts))
		index = indexParts(parts)
	}
	var strays []store.Ownership
	found := 0
	var batch partBatch
	flush := func() {
		batch.lookup(index, parts)
		for j := range batch.n {
			e := &batch.entries[j]
			var p string
			if e.part >= 0 {
				p = parts[e.part].ID
			} else {
				p = string(e.key)
				if err := store.ValidateID("partition", p); err != nil {
					bad(store.MalformedOwnership, k.owners, p, "%v", err)
					continue
				}
			}
			epoch, h := e.epoch, e.holder
			if h < 0 {
				// A holder not seen yet, or a malformed value: reported
				// with its partition's id.
				if epoch, h = decode(p, e.val); h < 0 {
					continue
				}
			}
			if e.part < 0 {
				strays = append(strays, record(p, epoch, h))
				continue
			}
			if at[e.part].holder == 0 {
				found++
			}
			at[e.part] = slot{epoch, h + 1}
		}
		batch.n = 0
	}
	for {
		key, v, ok, err := owners.next()
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		e := &batch.entries[batch.n]
		batch.n++
		e.key, e.val, e.holder = key, v, -1
		if epoch, rest, ok := parseEpoch(v); ok {
			if h, seen := hc.ids[string(rest)]; seen && hc.hs[h].bad == "" {
				e.epoch, e.holder = epoch, h
			}
		}
		if batch.n == len(batch.entries) {
			flush()
		}
	}
	flush()
	out := make([]store.Ownership, 0, found)
	for i := range at {
		if s := at[i]; s.holder > 0 {
			out = append(out, record(parts[i].ID, s.epoch, s.holder-1))
		}
	}
	return mergeStrays(out, strays), nil
}

// corrupt is the error of a call that meets a record it cannot decode.
func corrupt(key, field, format string, args ...any) error {
	return fmt.Errorf("redisstore: key %q field %q: %s: %w", key, field, fmt.Sprintf(format, args...), store.ErrCorrupt)
}

func abbrev(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// parseMeta decodes a members value "<weight>:<member>".
func parseMeta(v string) (weight int, member string, ok bool) {
	w, member, found := strings.Cut(v, ":")
	if !found || !allDigits(w) {
		return 0, "", false
	}
	weight, err := strconv.Atoi(w)
	if err != nil {
		return 0, "", false
	}
	return weight, member, true
}

// parseRecord decodes an owners value "<epoch>:<session>:<member>" with the
// same rules as the scripts' parse: a canonical decimal epoch in 1..2^64-1
// (parseEpoch), then a session and member as parseHolder accepts them. bad
// says why a value is malformed ("" if it is not).
func parseRecord(v string) (epoch uint64, session, member, bad string) {
	epoch, rest, ok := parseEpoch(v)
	if !ok {
		return 0, "", "", notRecord
	}
	session, member, bad = parseHolder(rest)
	return epoch, session, member, bad
}

// notRecord is why a value that is not "<epoch>:<session>:<member>" is
// malformed.
const notRecord = "is not <epoch>:<session>:<member>"

// parseEpoch splits an owners value at its epoch: the epoch, a canonical
// decimal in 1..2^64-1, and the rest, which names the holder. A Snapshot
// parses the bytes of HGETALL's raw reply (rawhash.go), other reads
// strings.
func parseEpoch[T string | []byte](v T) (epoch uint64, rest T, ok bool) {
	i := 0
	for i < len(v) && v[i] != ':' {
		i++
	}
	if i == 0 || i == len(v) || v[0] == '0' {
		return 0, rest, false
	}
	for j := range i {
		c := v[j]
		if c < '0' || c > '9' {
			return 0, rest, false
		}
		d := uint64(c - '0')
		if epoch > (^uint64(0)-d)/10 {
			return 0, rest, false // above 2^64-1
		}
		epoch = epoch*10 + d
	}
	return epoch, v[i+1:], true
}

// parseHolder decodes the part of an owners value after its epoch,
// "<session>:<member>" (both empty for a released record), and says why it
// is malformed ("" if it is not).
func parseHolder(rest string) (session, member, bad string) {
	session, member, found := strings.Cut(rest, ":")
	switch {
	case !found:
		return "", "", notRecord
	case session != "" && (store.ValidateID("session", session) != nil || store.ValidateID("member", member) != nil),
		session == "" && member != "":
		return "", "", "names a malformed session or member"
	}
	return session, member, ""
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// holderCache decodes the part of a record's value after its epoch
// ("<session>:<member>") once per distinct value: a group of 100,000
// records has as many of them as it has sessions.
type holderCache struct {
	hs  []holder
	ids map[string]int32 // value -> index in hs
}

type holder struct{ session, member, bad string }

// decode returns the epoch and the index in hc.hs of v's holder, or reports
// v (the record of partition p) as malformed and returns -1.
func (hc *holderCache) decode(k keys, p string, v []byte, bad func(kind, key, id, format string, args ...any)) (uint64, int32) {
	epoch, rest, ok := parseEpoch(v)
	if !ok {
		bad(store.MalformedOwnership, k.owners, p, "value %q %s", abbrev(string(v)), notRecord)
		return 0, -1
	}
	h, seen := hc.ids[string(rest)]
	if !seen {
		var x holder
		r := string(rest)
		x.session, x.member, x.bad = parseHolder(r)
		h = int32(len(hc.hs))
		hc.hs = append(hc.hs, x)
		hc.ids[r] = h
	}
	if hc.hs[h].bad != "" {
		bad(store.MalformedOwnership, k.owners, p, "value %q %s", abbrev(string(v)), hc.hs[h].bad)
		return 0, -1
	}
	return epoch, h
}

// mergeStrays merges the records of partitions outside the set (strays)
// into out, both sorted by partition.
func mergeStrays(out, strays []store.Ownership) []store.Ownership {
	if len(strays) == 0 {
		return out
	}
	slices.SortFunc(strays, func(a, b store.Ownership) int { return strings.Compare(a.Partition, b.Partition) })
	merged := make([]store.Ownership, 0, len(out)+len(strays))
	i := 0
	for _, o := range out {
		for i < len(strays) && strays[i].Partition < o.Partition {
			merged = append(merged, strays[i])
			i++
		}
		merged = append(merged, o)
	}
	return append(merged, strays[i:]...)
}
