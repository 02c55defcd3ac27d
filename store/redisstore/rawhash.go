package redisstore

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/herdhq/herd/internal/idindex"
	"github.com/herdhq/herd/store"
)

// A Snapshot reads the owners hash as the raw reply of HGETALL and walks it
// here, rather than through go-redis' map[string]string: the map cost two
// strings and an insertion per record to build and a lookup per record to
// read back in partition order, scattered over memory. With the raw reply a
// record costs no allocation of ours (go-redis still makes a small reader
// for each string it copies: see replyWriter), and the bytes are read in
// the order the server sent them (BenchmarkSnapshot100k).

// replyError is an error reply of the server met in a raw reply (as
// WRONGTYPE): a redis.Error, as go-redis reports those it parses itself.
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

// hashReply walks the raw reply of HGETALL: a map (RESP3) or an array of
// keys and values (RESP2) of bulk strings.
type hashReply struct {
	b     []byte // what is left to read
	raw   []byte // the whole reply
	pairs int    // pairs left
}

// newHashReply checks the header of raw, the raw reply of HGETALL, and
// returns a walker over its pairs; an error reply is returned as a
// replyError.
func newHashReply(raw []byte) (hashReply, error) {
	line, rest, ok := respLine(raw)
	if !ok || len(line) == 0 {
		return hashReply{}, fmt.Errorf("redisstore: HGETALL: malformed reply %.40q", raw)
	}
	switch line[0] {
	case '-', '!':
		return hashReply{}, replyError(line[1:])
	case '%', '*':
		n, err := strconv.Atoi(string(line[1:]))
		if err != nil || n < 0 || line[0] == '*' && n%2 != 0 {
			return hashReply{}, fmt.Errorf("redisstore: HGETALL: malformed reply header %q", line)
		}
		if line[0] == '*' {
			n /= 2
		}
		return hashReply{b: rest, raw: raw, pairs: n}, nil
	}
	return hashReply{}, fmt.Errorf("redisstore: HGETALL: unexpected reply %.40q", raw)
}

// len is how many pairs are left.
func (h *hashReply) len() int { return h.pairs }

// next returns the next pair; ok is false at the end, and err says if the
// reply ended before it should have.
func (h *hashReply) next() (k, v []byte, ok bool, err error) {
	if h.pairs == 0 {
		return nil, nil, false, nil
	}
	rest := h.b
	k, rest, ok = respBulk(rest)
	if ok {
		v, rest, ok = respBulk(rest)
	}
	if !ok {
		h.pairs = 0
		return nil, nil, false, fmt.Errorf("redisstore: HGETALL: malformed reply at byte %d", len(h.raw)-len(h.b))
	}
	h.b = rest
	h.pairs--
	return k, v, true, nil
}

// respLine splits b after its first line, which it returns without "\r\n".
func respLine(b []byte) (line, rest []byte, ok bool) {
	i := bytes.Index(b, []byte("\r\n"))
	if i < 0 {
		return nil, nil, false
	}
	return b[:i], b[i+2:], true
}

// respBulk reads one bulk string ("$<n>\r\n<n bytes>\r\n") from b.
func respBulk(b []byte) (s, rest []byte, ok bool) {
	if len(b) < 4 || b[0] != '$' {
		return nil, nil, false
	}
	n, i := 0, 1
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		n = n*10 + int(b[i]-'0')
		if n > len(b) {
			return nil, nil, false
		}
	}
	if i == 1 || i+2+n+2 > len(b) || b[i] != '\r' || b[i+1] != '\n' {
		return nil, nil, false
	}
	s = b[i+2 : i+2+n]
	if b[i+2+n] != '\r' || b[i+3+n] != '\n' {
		return nil, nil, false
	}
	return s, b[i+4+n:], true
}

// indexParts returns an index of parts by id (see idindex).
func indexParts(parts []store.Partition) idindex.Index {
	return idindex.Build(len(parts), func(i int) string { return parts[i].ID })
}

// partBatch is up to partLookAhead records of the reply whose partitions
// are looked up in the index together (see lookup).
type partBatch struct {
	n       int
	entries [partLookAhead]partEntry
}

// partEntry is one record of the reply.
type partEntry struct {
	key, val []byte // in the reply
	epoch    uint64
	holder   int32 // index of its holder, -1: not decoded yet
	part     int   // position of key in parts, -1: not in the set
}

// partLookAhead is how many records' partitions lookup looks up together.
const partLookAhead = 32

// lookup sets the part of the batch's entries: the position of key in
// parts, which index (from indexParts) indexes, or -1. It works in steps
// over all the entries at once: the hashes, the index's slots (passing
// over those of other ids by their tags), the ids there, their bytes. Each
// step's loads do not depend on one another, so the processor has them
// under way together; one key after another, a lookup waited for three
// loads from memory in a row, most of a Snapshot's decoding time on
// 100,000 records.
func (b *partBatch) lookup(index idindex.Index, parts []store.Partition) {
	var h, slot [partLookAhead]uint64
	for j := range b.n {
		h[j] = idindex.HashBytes(b.entries[j].key)
	}
	var at [partLookAhead]int
	for j := range b.n {
		at[j], slot[j] = index.Next(h[j], index.Home(h[j]))
	}
	var ids [partLookAhead]string
	for j := range b.n {
		if at[j] >= 0 {
			ids[j] = parts[at[j]].ID
		}
	}
	for j := range b.n {
		e := &b.entries[j]
		e.part = -1
		if at[j] < 0 {
			continue
		}
		if ids[j] == string(e.key) {
			e.part = at[j]
			continue
		}
		// Another id of the same tag: probe on.
		for v, s := index.Next(h[j], index.After(slot[j])); v >= 0; v, s = index.Next(h[j], index.After(s)) {
			if parts[v].ID == string(e.key) {
				e.part = v
				break
			}
		}
	}
}

// replyWriter collects a raw reply (see readGroup). go-redis' RawCmd grows
// its buffer by appending, about five times the reply's size allocated in
// all for a large one (48 MB per Snapshot of 100,000 records, half of it
// that slack); replyWriter sizes its buffer from the reply's header (a
// map or array of n elements: n times bytesPerElement), once.
type replyWriter struct{ b []byte }

// bytesPerElement is the room replyWriter makes per key or value of a
// reply: a record of the owners hash, with its RESP framing, is 61 bytes
// and the lengths of its partition and member ids (an epoch is 16 digits,
// a session id 26 characters): 96 bytes hold ids of up to about 35
// characters together. Longer ones grow the buffer (to twice its size:
// grown by a quarter at a time, as append does, a Snapshot of 100,000
// records of 16-character ids allocated three times the reply,
// BenchmarkFleetSnapshot).
const bytesPerElement = 48

// maxReplyHint bounds the room a header makes replyWriter take at once.
const maxReplyHint = 256 << 20

func (w *replyWriter) Write(p []byte) (int, error) {
	if w.b == nil {
		w.b = make([]byte, 0, replyHint(p))
	}
	if len(w.b)+len(p) > cap(w.b) {
		w.b = slices.Grow(w.b, max(len(p), cap(w.b)))
	}
	w.b = append(w.b, p...)
	return len(p), nil
}

// ReadFrom reads r to its end into the buffer: go-redis copies each bulk
// string with io.CopyN, which hands it a reader limited to the string.
func (w *replyWriter) ReadFrom(r io.Reader) (int64, error) {
	var n int64
	for {
		if len(w.b) == cap(w.b) {
			w.b = slices.Grow(w.b, max(4096, cap(w.b)))
		}
		k, err := r.Read(w.b[len(w.b):cap(w.b)])
		w.b = w.b[:len(w.b)+k]
		n += int64(k)
		switch {
		case err == io.EOF:
			return n, nil
		case err != nil:
			return n, err
		}
	}
}

// replyHint is the room for a reply whose first bytes are p (its header
// line): n elements of a map or array, 0 otherwise.
func replyHint(p []byte) int {
	if len(p) < 2 || p[0] != '*' && p[0] != '%' {
		return 0
	}
	n := 0
	for _, c := range p[1:] {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int(c-'0')
		if n > maxReplyHint {
			return maxReplyHint
		}
	}
	if p[0] == '%' {
		n *= 2
	}
	return min(n*bytesPerElement, maxReplyHint)
}
