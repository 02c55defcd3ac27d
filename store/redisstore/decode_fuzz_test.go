package redisstore

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/herdhq/herd/store"
)

// Fuzz targets of what this package decodes from the server: the raw
// HGETALL reply of the owners hash, owners values, partlist, log entries
// and their ids, and store URLs. Run one with
// go test -run='^$' -fuzz='^FuzzHashReply$' ./store/redisstore (scripts/fuzz
// runs them all; docs/fuzzing.md).

// respArray is the RESP2 reply of HGETALL holding pairs.
func respArray(pairs [][2][]byte) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "*%d\r\n", 2*len(pairs))
	for _, p := range pairs {
		for _, s := range p {
			fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(s), s)
		}
	}
	return b.Bytes()
}

// FuzzHashReply walks any bytes as an HGETALL reply: no panic, and the
// pairs of a reply that walks to its end re-encode to a reply that walks
// to the same pairs.
func FuzzHashReply(f *testing.F) {
	body := "$1\r\na\r\n$5\r\n1:S:m\r\n$1\r\nb\r\n$0\r\n\r\n$11\r\nline\r\nbreak\r\n$1\r\nx\r\n"
	for _, s := range []string{"*6\r\n" + body, "%3\r\n" + body, "*0\r\n", "%0\r\n", "-WRONGTYPE x\r\n",
		"*2\r\n$-1\r\n$1\r\na\r\n", "*4\r\n$1\r\na\r\n$5\r\n1:S:m\r\n$2\r\nbb\r\n$3\r\n2::\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		_ = replyHint(raw)
		h, err := newHashReply(raw)
		if err != nil {
			return
		}
		var pairs [][2][]byte
		for {
			k, v, ok, err := h.next()
			if err != nil {
				return
			}
			if !ok {
				break
			}
			pairs = append(pairs, [2][]byte{k, v})
		}
		h2, err := newHashReply(respArray(pairs))
		if err != nil {
			t.Fatalf("re-encoded reply: %v", err)
		}
		for i := 0; ; i++ {
			k, v, ok, err := h2.next()
			if err != nil {
				t.Fatalf("re-encoded reply, pair %d: %v", i, err)
			}
			if !ok {
				if i != len(pairs) {
					t.Fatalf("re-encoded reply has %d pairs, want %d", i, len(pairs))
				}
				break
			}
			if !bytes.Equal(k, pairs[i][0]) || !bytes.Equal(v, pairs[i][1]) {
				t.Fatalf("pair %d re-read as %q=%q, want %q=%q", i, k, v, pairs[i][0], pairs[i][1])
			}
		}
	})
}

// FuzzOwnersRecord decodes an owners value: a record that decodes writes
// back ("<epoch>:<session>:<member>") as the same bytes, and the epoch
// parser gives the same answer on bytes and on strings.
func FuzzOwnersRecord(f *testing.F) {
	for _, s := range []string{"1:S:m", "7::", "18446744073709551615:ABCDEFGHIJKLMNOPQRSTUVWXYZ:member-1",
		"18446744073709551616:S:m", "0:S:m", "01:S:m", "5", ":S:m", "5:S", "5::m"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		e1, rest1, ok1 := parseEpoch(v)
		e2, rest2, ok2 := parseEpoch([]byte(v))
		if e1 != e2 || ok1 != ok2 || rest1 != string(rest2) {
			t.Fatalf("parseEpoch(%q): string %d %q %v, bytes %d %q %v", v, e1, rest1, ok1, e2, rest2, ok2)
		}
		if ok1 && (e1 == 0 || strconv.FormatUint(e1, 10)+":"+rest1 != v) {
			t.Fatalf("parseEpoch(%q) = %d, %q: does not write back", v, e1, rest1)
		}
		epoch, session, member, bad := parseRecord(v)
		if bad != "" {
			return
		}
		if got := fmt.Sprintf("%d:%s:%s", epoch, session, member); got != v {
			t.Fatalf("parseRecord(%q) writes back as %q", v, got)
		}
		if session == "" && member != "" || session != "" && store.ValidateID("session", session) != nil {
			t.Fatalf("parseRecord(%q) accepted session %q member %q", v, session, member)
		}
	})
}

// FuzzPartList decodes partlist: what decodes is sorted, unique, valid, and
// encodes back as the same string.
func FuzzPartList(f *testing.F) {
	f.Add(encodePartList([]store.Partition{{ID: "b", Weight: 2}, {ID: "a", Weight: 1}, {ID: "0", Weight: 0}}))
	f.Add("a\x1f1\x1e")
	f.Add("b\x1f1\x1ea\x1f1\x1e")
	f.Add("a\x1f-1\x1e")
	f.Add("a\x1f99999999999999999999\x1e")
	f.Fuzz(func(t *testing.T, v string) {
		ps, ok := decodePartList(v)
		if !ok {
			return
		}
		for i, p := range ps {
			if store.ValidateID("partition", p.ID) != nil || p.Weight < 0 || i > 0 && ps[i-1].ID >= p.ID {
				t.Fatalf("decodePartList(%q) accepted %+v at %d", v, p, i)
			}
		}
		if got := encodePartList(ps); got != v {
			t.Fatalf("decodePartList(%q) encodes back as %q", v, got)
		}
	})
}

// FuzzSnapshot decodes a whole group read (its members, partition set and
// owners reply): no panic; a snapshot that decodes has its records sorted
// by partition, each once, with valid ids and an epoch from 1, and lists
// in Malformed what it left out.
func FuzzSnapshot(f *testing.F) {
	sess := "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	own := respArray([][2][]byte{{[]byte("a"), []byte("1:" + sess + ":m")}, {[]byte("b"), []byte("3::")},
		{[]byte("zz"), []byte("2:" + sess + ":m")}, {[]byte("c"), []byte("x")}})
	f.Add(own, encodePartList([]store.Partition{{ID: "a", Weight: 1}, {ID: "b", Weight: 1}}), "1:m", "12:34")
	f.Add([]byte("*0\r\n"), "", "", "")
	f.Fuzz(func(t *testing.T, raw []byte, plist, meta, version string) {
		h, err := newHashReply(raw)
		if err != nil {
			return
		}
		sess := "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
		r := groupRead{
			now:     time.UnixMicro(1_000_000),
			live:    []redis.Z{{Member: sess, Score: 5_000_000}, {Member: "bad", Score: 1}},
			metas:   map[string]string{sess: meta},
			owners:  h,
			version: version,
			marks:   map[string]string{"a": sess + ":m", "b": meta},
		}
		r.list, r.listed = decodePartList(plist)
		snap, err := decodeSnapshot(keys{owners: "o", members: "m", sessions: "s"}, r)
		if err != nil {
			return // a reply cut short
		}
		for i, o := range snap.Owners {
			if i > 0 && snap.Owners[i-1].Partition >= o.Partition {
				t.Fatalf("owners not sorted and unique at %d: %q after %q", i, o.Partition, snap.Owners[i-1].Partition)
			}
			if store.ValidateID("partition", o.Partition) != nil || o.Epoch == 0 ||
				o.Session == "" && o.Member != "" {
				t.Fatalf("decoded a malformed record %+v", o)
			}
		}
	})
}

// FuzzLogEntry decodes a log entry's value and id: no panic; a change that
// decodes has what its kind needs, and an id writes back as read.
func FuzzLogEntry(f *testing.F) {
	for _, s := range []string{"O\nS\n1:m", "X\nS", "E\nS", "C\np\nS\n5\nm", "R\np\nS\n5", "R\np\nS\n5\nS",
		"T\np\n5", "P\na\n1\nb\n2", "P", "M\x1eC\np\nS\n5\nm\x1eR\np\nS\n5", "C\np\nS\n0\nm", "R\np\nS\n5\n"} {
		f.Add(s, "3-17")
	}
	f.Fuzz(func(t *testing.T, v, id string) {
		_, _ = parseEntryID(id)
		if ver, ok := parseVersion(v); ok && ver.Tag == 0 {
			t.Fatalf("parseVersion(%q) = %+v: tag 0", v, ver)
		}
		c, err := decodeChange(store.Version{Seq: 1, Tag: 1}, v)
		if err != nil {
			return
		}
		switch c.Kind {
		case store.Claimed, store.Released, store.Restored:
			if c.Epoch == 0 {
				t.Fatalf("decodeChange(%q): %v with epoch 0", v, c.Kind)
			}
		case store.PartitionsSet:
			if !slices.IsSortedFunc(c.Partitions, func(a, b store.Partition) int { return strings.Compare(a.ID, b.ID) }) {
				t.Fatalf("decodeChange(%q): partitions not sorted", v)
			}
			for _, p := range c.Partitions {
				if p.Weight < 0 {
					t.Fatalf("decodeChange(%q): negative weight", v)
				}
			}
		}
	})
}

// FuzzLogEntries checks a read of two entries against the version read
// after: no panic, and every error is ErrVersionGone.
func FuzzLogEntries(f *testing.F) {
	e1, e2 := "C\np\nS\n5\nm", "M\x1eR\np\nS\n5\x1eT\np\n6"
	t1, _ := chain(nil, 0, e1)
	t2, _ := chain(nil, t1, e2)
	// Entries with their time ("t"), and without (written by an older herd).
	f.Add(fmt.Sprintf("1-%d", t1), e1, "1700000000000001", fmt.Sprintf("3-%d", t2), e2, "1700000000000002", uint64(0), uint64(0), 10)
	f.Add(fmt.Sprintf("1-%d", t1), e1, "", fmt.Sprintf("3-%d", t2), e2, "", uint64(0), uint64(0), 10)
	f.Add(fmt.Sprintf("1-%d", t1), e1, "x", fmt.Sprintf("3-%d", t2), e2, "1700000000000002", uint64(2), t2, 1)
	f.Fuzz(func(t *testing.T, id1, v1, at1, id2, v2, at2 string, seq, tag uint64, max int) {
		if max <= 0 || max > 1000 {
			return
		}
		msgs := []redis.XMessage{{ID: id1, Values: map[string]any{"e": v1}}, {ID: id2, Values: map[string]any{"e": v2}}}
		for i, at := range []string{at1, at2} {
			if at != "" {
				msgs[i].Values["t"] = at
			}
		}
		after := store.Version{Seq: seq, Tag: tag}
		out, v, err := decodeEntries(nil, after, msgs, max)
		// Into a list of used changes (ChangesInto): the same answer.
		used := make([]store.Change, max)
		for i := range used {
			used[i] = store.Change{Kind: store.Released, Partition: "old", GivenBack: "G", Loads: []store.Load{{Partition: "x"}}}
		}
		if got, gv, gerr := decodeEntries(used[:0], after, msgs, max); (gerr == nil) != (err == nil) || gv != v || len(got) != len(out) || len(out) > 0 && !reflect.DeepEqual(got, out) {
			t.Fatalf("decodeEntries into used changes: %v up to %v (%v); into none %v up to %v (%v)", got, gv, gerr, out, v, err)
		}
		if err != nil {
			if !errors.Is(err, store.ErrVersionGone) {
				t.Fatalf("decodeEntries: %v; want ErrVersionGone", err)
			}
			return
		}
		if len(out) > max {
			t.Fatalf("decodeEntries returned %d changes, max %d", len(out), max)
		}
		prev := after.Seq
		for _, c := range out {
			if c.Version.Seq != prev+1 {
				t.Fatalf("change at %d after %d", c.Version.Seq, prev)
			}
			prev = c.Version.Seq
			if !c.At.IsZero() && c.At.UnixMicro() <= 0 {
				t.Fatalf("change %v: time %v before 1970", c.Version, c.At)
			}
		}
		if len(out) > 0 && !reflect.DeepEqual(v, out[len(out)-1].Version) {
			t.Fatalf("version %v, last change at %v", v, out[len(out)-1].Version)
		}
	})
}

// secretMark is in every password the URL targets make: no error and no
// redacted URL may hold it.
const secretMark = "Sekr3tMark"

// FuzzURL parses store URLs whose user info holds a password, percent-
// encoded or not: every error wraps ErrInvalid, and neither an error nor
// the redacted URL holds the password.
func FuzzURL(f *testing.F) {
	f.Add("redis", "u", "p@ss", "h:7000", "/3?prefix=x", true)
	f.Add("rediss", "", "pw", "[::1]:7000", "/0", true)
	f.Add("redis+cluster", "u", "p/w", "a:1,b:2", "", false)
	f.Add("redis+sentinel", "u", "p?w", "a:1,b:2", "/mymaster?sentinel_password=x", false)
	f.Add("unix", "u", "p", "", "/tmp/redis.sock?db=1", true)
	f.Fuzz(func(t *testing.T, scheme, user, pass, host, tail string, escape bool) {
		if strings.Contains(scheme+user+host+tail, secretMark) {
			return
		}
		pass += secretMark
		enc := pass
		if escape {
			enc = strings.ReplaceAll(url.QueryEscape(pass), "+", "%2B")
		}
		raw := scheme + "://" + user + ":" + enc + "@" + host + tail
		tg, err := parseURL(raw)
		if err != nil {
			if !errors.Is(err, store.ErrInvalid) {
				t.Fatalf("parseURL(%q): %v; want ErrInvalid", raw, err)
			}
			if strings.Contains(err.Error(), secretMark) {
				t.Fatalf("parseURL(%q): the error holds the password: %v", raw, err)
			}
			return
		}
		if strings.Contains(tg.redacted, secretMark) {
			t.Fatalf("parseURL(%q): the redacted URL holds the password: %s", raw, tg.redacted)
		}
	})
}
