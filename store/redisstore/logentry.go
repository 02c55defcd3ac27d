package redisstore

import (
	"crypto/sha1"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/herdhq/herd/store"
	"github.com/redis/go-redis/v9"
)

// The decoding of the log: one change (see the table in log.go), and the
// entries of a read, checked against the chain of tags.

// decodeChange decodes one entry's value (see the table above).
func decodeChange(version store.Version, v string) (store.Change, error) {
	var c store.Change
	err := decodeChangeTo(&c, version, v)
	return c, err
}

// decodeChangeTo decodes one entry's value into *c (all of it: *c is
// overwritten), in place: a Change is 168 bytes, which decodeChange
// returned and the reader copied again into its list. The fields are cut
// one after the other, with no list of them; the strings are v's. Decoding
// a placement's log took 372 ns of CPU a change with the list of fields
// and the copy, 326 without (BenchmarkFleetDecodeLog, medians of three
// alternated runs on a loaded 2-core machine).
func decodeChangeTo(c *store.Change, version store.Version, v string) error {
	bad := func() error {
		*c = store.Change{}
		return fmt.Errorf("entry %v %q cannot be decoded", version, abbrev(v))
	}
	if v == "P" {
		// A partition set of no partitions.
		*c = store.Change{Version: version, Kind: store.PartitionsSet, Partitions: []store.Partition{}}
		return nil
	}
	if len(v) < 2 || v[1] != '\n' {
		return bad()
	}
	kind, rest := v[0], v[2:]
	// f is the next field of rest, and rest what follows it; last says it
	// was the last field.
	next := func() (f string, last bool) {
		i := strings.IndexByte(rest, '\n')
		if i < 0 {
			f, rest = rest, ""
			return f, true
		}
		f, rest = rest[:i], rest[i+1:]
		return f, false
	}
	switch kind {
	case 'C':
		p, l1 := next()
		sess, l2 := next()
		e, l3 := next()
		member, l4 := next()
		epoch, ok := parseEntryEpoch(e)
		if l1 || l2 || l3 || !l4 || !ok {
			return bad()
		}
		*c = store.Change{Version: version, Kind: store.Claimed, Partition: p, Session: sess, Member: member, Epoch: epoch}
	case 'R':
		p, l1 := next()
		sess, l2 := next()
		e, l3 := next()
		giver, l4 := "", true
		if !l3 {
			// A GiveBack. Entries of a plain release, and every entry
			// written before GiveBack existed, have four fields.
			if giver, l4 = next(); giver == "" {
				return bad()
			}
		}
		epoch, ok := parseEntryEpoch(e)
		if l1 || l2 || !l4 || !ok {
			return bad()
		}
		*c = store.Change{Version: version, Kind: store.Released, Partition: p, Session: sess, Epoch: epoch, GivenBack: giver}
	case 'T':
		p, l1 := next()
		e, l2 := next()
		epoch, ok := parseEntryEpoch(e)
		if l1 || !l2 || !ok {
			return bad()
		}
		*c = store.Change{Version: version, Kind: store.Restored, Partition: p, Epoch: epoch}
	case 'O':
		sess, l1 := next()
		meta, l2 := next()
		weight, member, ok := parseMeta(meta)
		if l1 || !l2 || !ok {
			return bad()
		}
		*c = store.Change{Version: version, Kind: store.SessionOpened, Session: sess, Member: member, Weight: weight}
	case 'X', 'E':
		if strings.IndexByte(rest, '\n') >= 0 {
			return bad()
		}
		k := store.SessionClosed
		if kind == 'E' {
			k = store.SessionExpired
		}
		*c = store.Change{Version: version, Kind: k, Session: rest}
	case 'Q':
		action, l1 := next()
		p, l2 := next()
		member, l3 := next()
		r := store.Request{Action: action, Partition: p, Member: member}
		if l1 || l2 || !l3 || r.Validate() != nil {
			return bad()
		}
		*c = store.Change{Version: version, Kind: store.Requested, Action: action, Partition: p, Member: member}
	case 'L':
		sess, loads, ok := decodeLoadsEntry(rest)
		if !ok {
			return bad()
		}
		*c = store.Change{Version: version, Kind: store.LoadsReported, Session: sess, Loads: loads}
	case 'P':
		ps, ok := decodeSetEntry(rest)
		if !ok {
			return bad()
		}
		*c = store.Change{Version: version, Kind: store.PartitionsSet, Partitions: ps}
	default:
		return bad()
	}
	return nil
}

// parseEntryEpoch decodes an epoch of an entry: decimal digits (leading
// zeros allowed, as strconv.ParseUint reads them) of a number in
// 1..2^64-1.
func parseEntryEpoch(s string) (uint64, bool) {
	if s == "" {
		return 0, false
	}
	var e uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if e > (^uint64(0)-d)/10 {
			return 0, false
		}
		e = e*10 + d
	}
	return e, e > 0
}

// decodeSetEntry decodes the fields of a partition set's entry after "P\n":
// "<partition>\n<weight>" pairs, sorted as a snapshot's (the script writes
// them in the caller's order).
func decodeSetEntry(v string) ([]store.Partition, bool) {
	f := strings.Split(v, "\n")
	if len(f)%2 != 0 {
		return nil, false
	}
	ps := make([]store.Partition, 0, len(f)/2)
	for i := 0; i < len(f); i += 2 {
		w, err := strconv.Atoi(f[i+1])
		if err != nil || w < 0 {
			return nil, false
		}
		ps = append(ps, store.Partition{ID: f[i], Weight: w})
	}
	slices.SortFunc(ps, func(a, b store.Partition) int { return strings.Compare(a.ID, b.ID) })
	return ps, true
}

// parseVersion decodes the version key "<tag>:<seq>".
func parseVersion(v string) (store.Version, bool) {
	g, n, ok := strings.Cut(v, ":")
	if !ok || !allDigits(g) || !allDigits(n) {
		return store.Version{}, false
	}
	tag, err1 := strconv.ParseUint(g, 10, 64)
	seq, err2 := strconv.ParseUint(n, 10, 64)
	if err1 != nil || err2 != nil || tag == 0 {
		return store.Version{}, false
	}
	return store.Version{Seq: seq, Tag: tag}, true
}

// parseEntryID decodes a log entry id "<seq>-<tag>".
func parseEntryID(id string) (v store.Version, ok bool) {
	a, b, found := strings.Cut(id, "-")
	if !found {
		return v, false
	}
	seq, err1 := strconv.ParseUint(a, 10, 64)
	tag, err2 := strconv.ParseUint(b, 10, 64)
	return store.Version{Seq: seq, Tag: tag}, err1 == nil && err2 == nil
}

// chain is the tag of the entry with value e that follows an entry tagged
// prev: the scripts' chain, in Go. It hashes in buf, returned for reuse:
// decodeEntries checks entries of a few kilobytes each, and allocated a
// copy of each.
func chain(buf []byte, prev uint64, e string) (uint64, []byte) {
	buf = strconv.AppendUint(buf[:0], prev, 10)
	buf = append(append(buf, '\n'), e...)
	h := sha1.Sum(buf)
	t := binary.BigEndian.Uint64(h[:8]) >> 12 // the first 13 hex digits
	if t == 0 {
		t = 1
	}
	return t, buf
}

// decodeEntries checks that msgs continue after without a gap and in its
// history (each tag chains from the previous one), and appends at most max
// changes of them to dst. after may be inside an entry (a read that stopped
// at max): that entry's changes up to after are left out. On error it
// returns nil.
func decodeEntries(dst []store.Change, after store.Version, msgs []redis.XMessage, max int) ([]store.Change, store.Version, error) {
	out := slices.Grow(dst, min(max, changesAfter(msgs, after.Seq)))
	end := len(dst) + max // out is full at this length
	v := after
	var buf []byte // chain's
	for _, m := range msgs {
		id, ok := parseEntryID(m.ID)
		val, _ := m.Values["e"].(string)
		if !ok {
			return nil, after, gone(after, "entry id %q is not <seq>-<tag>", abbrev(m.ID))
		}
		// The entry's changes, one after the other (cut from rest, not
		// split into a list: that was a list per entry).
		at := entryTime(m.Values["t"])
		rest, grouped := strings.CutPrefix(val, groupPrefix)
		n := uint64(1)
		if grouped {
			n += uint64(strings.Count(rest, groupSep))
		}
		first := id.Seq - n + 1 // the entry's first change (n <= id.Seq: checked below)
		skip := uint64(0)
		var tag uint64
		if first == v.Seq+1 && n <= id.Seq {
			tag, buf = chain(buf, v.Tag, val)
		}
		switch {
		case n > id.Seq:
			return nil, after, gone(after, "entry %v holds %d changes", id, n)
		case first == v.Seq+1 && id.Tag == tag:
		case id.Tag == v.Tag && first <= v.Seq && v.Seq < id.Seq:
			skip = v.Seq - first + 1 // after is inside this entry
		case first != v.Seq+1:
			return nil, after, gone(after, "the log continues at %d, not %d", first, v.Seq+1)
		default:
			return nil, after, gone(after, "entry %v does not follow %v: another history of the group", id, v)
		}
		for i := range n {
			one := rest
			if grouped {
				one, rest, _ = strings.Cut(rest, groupSep)
			}
			if i < skip {
				continue
			}
			cv := store.Version{Seq: first + i, Tag: id.Tag}
			// decodeChangeTo writes all of the change: out grows
			// without zeroing it first where it has room.
			if len(out) < cap(out) {
				out = out[:len(out)+1]
			} else {
				out = append(out, store.Change{})
			}
			if err := decodeChangeTo(&out[len(out)-1], cv, one); err != nil {
				return nil, after, gone(after, "%v", err)
			}
			out[len(out)-1].At = at
			v = cv
			if len(out) == end {
				return out, v, nil
			}
		}
	}
	return out, v, nil
}

// changesAfter counts the changes after sequence seq in entries msgs, whose
// ids increase (an entry's changes end at its id's sequence), for a read
// that continues seq: the sequence of the last entry's id less seq. Where
// they follow seq without a gap, as decodeEntries checks, that is every
// change after seq, counted without a pass over the entries' values (a
// read of the log made two, besides decodeEntries' own). Where they do
// not, the count may be wrong, and decodeEntries fails the read: ids that
// do not decode, or do not increase, are counted value by value (an entry
// whose id or value does not decode counts as none).
func changesAfter(msgs []redis.XMessage, seq uint64) int {
	if len(msgs) == 0 {
		return 0
	}
	if last, ok := parseEntryID(msgs[len(msgs)-1].ID); ok && last.Seq > seq && last.Seq-seq <= math.MaxInt32 {
		return int(last.Seq - seq)
	}
	return countChangesAfter(msgs, seq)
}

// countChangesAfter is changesAfter, value by value.
func countChangesAfter(msgs []redis.XMessage, seq uint64) int {
	n := 0
	for _, m := range msgs {
		id, ok := parseEntryID(m.ID)
		if !ok || id.Seq <= seq {
			continue
		}
		val, _ := m.Values["e"].(string)
		in := uint64(1)
		if strings.HasPrefix(val, groupPrefix) {
			in += uint64(strings.Count(val, groupSep) - 1)
		}
		n += int(min(in, id.Seq-seq))
	}
	return n
}

// entryTime decodes an entry's "t" field (µs since the Unix epoch); an
// absent or malformed one (an entry of an older herd) is the zero time:
// At is for display, and a bad time must not end the reader's version.
func entryTime(v any) time.Time {
	t, _ := v.(string)
	us, err := strconv.ParseInt(t, 10, 64)
	if err != nil || us <= 0 {
		return time.Time{}
	}
	return time.UnixMicro(us).UTC()
}

// groupPrefix starts the value of an entry of several changes, groupSep
// separates them (see the table above).
const (
	groupPrefix = "M\x1e"
	groupSep    = "\x1e"
)
