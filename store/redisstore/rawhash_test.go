package redisstore

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/herdhq/herd/store"
)

// pairsOf walks a raw HGETALL reply to its end.
func pairsOf(raw string) ([][2]string, error) {
	h, err := newHashReply([]byte(raw))
	if err != nil {
		return nil, err
	}
	var out [][2]string
	for {
		k, v, ok, err := h.next()
		if err != nil {
			return out, err
		}
		if !ok {
			return out, nil
		}
		out = append(out, [2]string{string(k), string(v)})
	}
}

func TestHashReplyBothProtocols(t *testing.T) {
	want := [][2]string{{"a", "1:S:m"}, {"b", ""}, {"line\r\nbreak", "x"}}
	body := "$1\r\na\r\n$5\r\n1:S:m\r\n$1\r\nb\r\n$0\r\n\r\n$11\r\nline\r\nbreak\r\n$1\r\nx\r\n"
	for _, raw := range []string{"*6\r\n" + body, "%3\r\n" + body} {
		got, err := pairsOf(raw)
		if err != nil {
			t.Fatalf("%q: %v", raw[:2], err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%q: pairs %q; want %q", raw[:2], got, want)
		}
	}
	for _, raw := range []string{"*0\r\n", "%0\r\n"} {
		if got, err := pairsOf(raw); err != nil || len(got) != 0 {
			t.Fatalf("%q: %q, %v; want no pairs", raw, got, err)
		}
	}
}

func TestHashReplyError(t *testing.T) {
	_, err := pairsOf("-WRONGTYPE Operation against a key holding the wrong kind of value\r\n")
	if !isRedisError(err) {
		t.Fatalf("error %v (%T); want a redis.Error", err, err)
	}
	if err := fail("Snapshot", err); !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("fail: %v; want ErrCorrupt", err)
	}
}

// Every cut of a valid reply, and replies broken in other ways, give an
// error, never a panic or pairs that are not in the reply.
func TestHashReplyMalformed(t *testing.T) {
	valid := "*4\r\n$1\r\na\r\n$5\r\n1:S:m\r\n$2\r\nbb\r\n$3\r\n2::\r\n"
	for i := range len(valid) {
		got, err := pairsOf(valid[:i])
		if err == nil {
			t.Fatalf("cut at %d (%q): pairs %q, no error", i, valid[:i], got)
		}
	}
	for _, raw := range []string{
		"", "\r\n", "*", "*3\r\n", "*-1\r\n", "%-1\r\n", "*x\r\n", "+OK\r\n", ":1\r\n",
		"*2\r\n$-1\r\n$1\r\na\r\n",                     // a nil key
		"*2\r\n$1\r\nab\r\n$1\r\na\r\n",                // a length that does not fit
		"*2\r\n$99999999999999999999\r\na\r\n",         // a length that overflows
		"*2\r\n+a\r\n+b\r\n",                           // not bulk strings
		"%1\r\n$1\r\na\r\n",                            // a key without its value
		"%1\r\n$1\r\na\r\n$1\r\nbXY",                   // no \r\n after a value
		"*2\r\n$" + strconv.Itoa(math.MaxInt) + "\r\n", // a length as large as can be
	} {
		got, err := pairsOf(raw)
		if err == nil {
			t.Fatalf("%q: pairs %q, no error", raw, got)
		}
	}
}

func TestParseEpoch(t *testing.T) {
	for _, c := range []struct {
		v     string
		epoch uint64
		rest  string
		ok    bool
	}{
		{"1:a:b", 1, "a:b", true},
		{"42::", 42, ":", true},
		{"18446744073709551615:s:m", math.MaxUint64, "s:m", true},
		{"18446744073709551616:s:m", 0, "", false}, // overflows
		{"0:s:m", 0, "", false},
		{"01:s:m", 0, "", false},
		{":s:m", 0, "", false},
		{"1a:s:m", 0, "", false},
		{"12", 0, "", false},
		{"", 0, "", false},
	} {
		epoch, rest, ok := parseEpoch(c.v)
		if epoch != c.epoch || rest != c.rest || ok != c.ok {
			t.Errorf("parseEpoch(%q) = %d, %q, %v; want %d, %q, %v", c.v, epoch, rest, ok, c.epoch, c.rest, c.ok)
		}
		eb, rb, okb := parseEpoch([]byte(c.v))
		if eb != epoch || string(rb) != rest || okb != ok {
			t.Errorf("parseEpoch on bytes %q = %d, %q, %v; on a string %d, %q, %v", c.v, eb, rb, okb, epoch, rest, ok)
		}
	}
}

// lookup finds every partition of the set, in batches of any size, and
// nothing else, through collisions in the index.
func TestPartBatchLookup(t *testing.T) {
	var parts []store.Partition
	for i := range 5000 {
		parts = append(parts, store.Partition{ID: fmt.Sprintf("p%05d", i*2)})
	}
	index := indexParts(parts)
	var b partBatch
	check := func() {
		b.lookup(index, parts)
		for j := range b.n {
			e := b.entries[j]
			n, _ := strconv.Atoi(string(e.key[1:]))
			switch {
			case n%2 == 0 && (e.part < 0 || parts[e.part].ID != string(e.key)):
				t.Fatalf("%s: at %d; want %d", e.key, e.part, n/2)
			case n%2 == 1 && e.part != -1:
				t.Fatalf("%s: at %d; want -1 (not in the set)", e.key, e.part)
			}
		}
		b.n = 0
	}
	for i := range 10000 {
		b.entries[b.n].key = []byte(fmt.Sprintf("p%05d", i))
		if b.n++; b.n == len(b.entries) || i%97 == 0 {
			check()
		}
	}
	check()
	if indexParts(nil).Len() == 0 {
		t.Fatal("an empty set's index has no slot: lookup would loop")
	}
}

// replyWriter takes room for the reply its header announces once, and
// collects what go-redis writes and copies into it unchanged.
func TestReplyWriter(t *testing.T) {
	var w replyWriter
	if _, err := w.Write([]byte("%3")); err != nil {
		t.Fatal(err)
	}
	if c := cap(w.b); c < 6*bytesPerElement {
		t.Fatalf("room %d after a header of 3 pairs; want at least %d", c, 6*bytesPerElement)
	}
	_, _ = w.Write([]byte("\r\n$1\r\n"))
	body := strings.Repeat("x", 10000) // longer than the room: the buffer grows
	n, err := io.CopyN(&w, strings.NewReader(body+"\r\nrest"), int64(len(body))+2)
	if err != nil || n != int64(len(body))+2 {
		t.Fatalf("CopyN: %d, %v", n, err)
	}
	if got, want := string(w.b), "%3\r\n$1\r\n"+body+"\r\n"; got != want {
		t.Fatalf("collected %d bytes; want %d", len(got), len(want))
	}
	for _, c := range []struct {
		p    string
		want int
	}{
		{"*4", 4 * bytesPerElement},
		{"%4", 8 * bytesPerElement},
		{"*0", 0},
		{"*-1", 0},
		{"+OK", 0},
		{"-ERR", 0},
		{"", 0},
		{"*99999999999999999999999", maxReplyHint},
	} {
		if got := replyHint([]byte(c.p)); got != c.want {
			t.Errorf("replyHint(%q) = %d; want %d", c.p, got, c.want)
		}
	}
}
