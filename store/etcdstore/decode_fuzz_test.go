package etcdstore

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/herdhq/herd/store"
)

// Fuzz targets of what this package decodes from the cluster: ownership
// and member records, partition set chunks, log keys and their entries,
// pending keys, checkpoints, and store URLs (docs/fuzzing.md). A key or
// value written by something else must give an error or a record herd
// could have written, never a panic.

const (
	fuzzGroup   = "herd/g/"
	fuzzSession = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	secretMark  = "Sekr3tMark"
)

func kv(key string, value []byte) *mvccpb.KeyValue {
	return &mvccpb.KeyValue{Key: []byte(key), Value: value}
}

// FuzzRecord decodes an ownership record: one a snapshot lists is one herd
// could have written (CheckOwnership), and encodes back to the same record.
func FuzzRecord(f *testing.F) {
	f.Add("p", mustJSON(record{Session: fuzzSession, Member: "m", Epoch: 5, Since: 1}))
	f.Add("p", mustJSON(record{Epoch: 3, GivenBack: fuzzSession}))
	f.Add("city:west", `{"s":"x","m":"m","e":1}`)
	f.Add("", `{"e":1}`)
	f.Add("p", `{"m":"m","e":1}`)
	f.Add("p", `{"e":0}`)
	f.Add("p", `[]`)
	f.Fuzz(func(t *testing.T, id, v string) {
		o, err := ownerOf(id, kv(fuzzGroup+"r/"+id, []byte(v)))
		if err != nil {
			if !errors.Is(err, store.ErrCorrupt) {
				t.Fatalf("ownerOf(%q, %q): %v; want ErrCorrupt", id, v, err)
			}
			return
		}
		if err := store.CheckOwnership(o); err != nil || o.Partition != id {
			t.Fatalf("ownerOf(%q, %q) = %+v (%v)", id, v, o, err)
		}
		r := record{Session: o.Session, Member: o.Member, Epoch: o.Epoch, GivenBack: o.GivenBack}
		back, err := ownerOf(id, kv("k", []byte(mustJSON(r))))
		if err != nil || !reflect.DeepEqual(back, o) {
			t.Fatalf("ownerOf(%q, %q) = %+v encodes back as %+v (%v)", id, v, o, back, err)
		}
	})
}

// FuzzSession decodes a member record (key m/<session>): one that decodes
// names a session id of this store and a valid member, and no negative
// weight or TTL.
func FuzzSession(f *testing.F) {
	f.Add(fuzzSession, mustJSON(sessionInfo{Member: "m", Weight: 2, TTL: time.Second, Lease: 7}))
	f.Add("abc", `{"m":"m","t":1}`)
	f.Add(fuzzSession, `{"m":"","t":1}`)
	f.Add(fuzzSession, `{"m":"m","w":-1,"t":1}`)
	f.Fuzz(func(t *testing.T, id, v string) {
		info, err := sessionOf(id, kv(fuzzGroup+"m/"+id, []byte(v)))
		if err != nil {
			return
		}
		if !store.IsSessionID(id) || store.ValidateID("member", info.Member) != nil || info.Weight < 0 || info.TTL < 0 {
			t.Fatalf("sessionOf(%q, %q) accepted %+v", id, v, info)
		}
	})
}

// FuzzSetChunks decodes a partition set of two chunks: the set is sorted,
// each id once and valid, no weight negative, and every entry of the
// chunks is either in it or listed as malformed.
func FuzzSetChunks(f *testing.F) {
	f.Add(mustJSON([]setPart{{ID: "b", Weight: 2}, {ID: "a"}}), mustJSON([]setPart{{ID: "c", Weight: 1}}))
	f.Add(`[{"i":"a"},{"i":"a"}]`, `[{"i":"","w":-1}]`)
	f.Add(`[{"i":"a\u0000"}]`, `{}`)
	f.Fuzz(func(t *testing.T, c1, c2 string) {
		ps, bad, err := decodeSet([]*mvccpb.KeyValue{kv(chunkKey(fuzzGroup, "s", 0), []byte(c1)), kv(chunkKey(fuzzGroup, "s", 1), []byte(c2))})
		if err != nil {
			if !errors.Is(err, store.ErrCorrupt) {
				t.Fatalf("decodeSet(%q, %q): %v; want ErrCorrupt", c1, c2, err)
			}
			return
		}
		for i, p := range ps {
			if store.ValidateID("partition", p.ID) != nil || p.Weight < 0 || i > 0 && ps[i-1].ID >= p.ID {
				t.Fatalf("decodeSet(%q, %q) accepted %+v at %d", c1, c2, p, i)
			}
		}
		var all []setPart
		for _, c := range []string{c1, c2} {
			var part []setPart
			_ = json.Unmarshal([]byte(c), &part)
			all = append(all, part...)
		}
		if len(ps)+len(bad) != len(all) {
			t.Fatalf("decodeSet(%q, %q): %d partitions and %d malformed of %d entries", c1, c2, len(ps), len(bad), len(all))
		}
	})
}

// FuzzLogKey decodes a sequenced log key and its entries as a reader does:
// no panic; a key that decodes names a seq within the sequence, and every
// change it gives is one the replica can apply (an epoch for ownership
// changes, a valid sorted set, a valid request).
func FuzzLogKey(f *testing.F) {
	es := []entry{entryOf(store.Change{Kind: store.Claimed, Session: fuzzSession, Member: "m", Partition: "p", Epoch: 4}, time.UnixMicro(1)),
		entryOf(store.Change{Kind: store.PartitionsSet, Partitions: []store.Partition{{ID: "b", Weight: 1}, {ID: "a", Weight: 2}}}, time.UnixMicro(2)),
		entryOf(store.Change{Kind: store.Released, Session: fuzzSession, Partition: "p", Epoch: 4, GivenBack: fuzzSession}, time.Time{})}
	f.Add(mustJSON(es), "00000000000000000007", uint64(9))
	f.Add(`[{"k":3,"e":0}]`, "1", uint64(1))
	f.Add(`[]`, "1", uint64(1))
	f.Add(`[{"k":2}]`, "-1", uint64(1))
	s := &Store{} // no client: entries that name a set in chunks are not read
	f.Fuzz(func(t *testing.T, v, seq string, last uint64) {
		got, first, err := logKeyEntries(fuzzGroup, kv(fuzzGroup+"l/"+seq, []byte(v)), last)
		if err != nil {
			if !errors.Is(err, store.ErrCorrupt) {
				t.Fatalf("logKeyEntries(%q, %q): %v; want ErrCorrupt", v, seq, err)
			}
			return
		}
		if len(got) == 0 || first == 0 || first+uint64(len(got))-1 > last {
			t.Fatalf("logKeyEntries(%q, %q, %d): %d entries from %d", v, seq, last, len(got), first)
		}
		for _, e := range got {
			if e.Kind == store.PartitionsSet && e.Set != "" {
				continue
			}
			c, err := s.changeOf(context.Background(), fuzzGroup, e, 1)
			if err != nil {
				if !errors.Is(err, store.ErrCorrupt) {
					t.Fatalf("changeOf(%+v): %v; want ErrCorrupt", e, err)
				}
				continue
			}
			checkChange(t, c)
		}
	})
}

// checkChange fails t if c is a change herd never logs.
func checkChange(t *testing.T, c store.Change) {
	t.Helper()
	switch c.Kind {
	case store.Claimed, store.Released, store.Restored:
		if c.Epoch == 0 || store.ValidateID("partition", c.Partition) != nil {
			t.Fatalf("change %+v: no epoch or no valid partition", c)
		}
	case store.PartitionsSet:
		for i, p := range c.Partitions {
			if store.ValidateID("partition", p.ID) != nil || p.Weight < 0 || i > 0 && c.Partitions[i-1].ID >= p.ID {
				t.Fatalf("change %+v: partition %+v at %d", c, p, i)
			}
		}
	case store.Requested:
		if err := c.Request().Validate(); err != nil {
			t.Fatalf("change %+v: %v", c, err)
		}
	case store.LoadsReported:
		if err := store.ValidateLoads(c.Loads); err != nil {
			t.Fatalf("change %+v: %v", c, err)
		}
	}
}

// FuzzPendingKey splits a pending key into its entries and tags each as a
// reader sequencing it does: no panic, and every entry it gives is a JSON
// object that decodes as an entry once tagged.
func FuzzPendingKey(f *testing.F) {
	f.Add(mustJSON([]json.RawMessage{json.RawMessage(mustJSON(entryOf(store.Change{Kind: store.SessionClosed, Session: fuzzSession}, time.UnixMicro(1))))}))
	f.Add(`[{}]`)
	f.Add(`[{"k":1},[]]`)
	f.Add(`[{ }]`)
	f.Fuzz(func(t *testing.T, v string) {
		es, err := pendingEntries([]byte(fuzzGroup+"u/x"), []byte(v))
		if err != nil {
			if !errors.Is(err, store.ErrCorrupt) {
				t.Fatalf("pendingEntries(%q): %v; want ErrCorrupt", v, err)
			}
			return
		}
		for _, e := range es {
			tagged, tag := chain(7, e)
			var back entry
			if err := json.Unmarshal(tagged, &back); err != nil {
				continue // an object whose fields do not decode as an entry's: the reader reports the key
			}
			if back.Tag != tag {
				t.Fatalf("chain(%q) = %q: tag %d, want %d", e, tagged, back.Tag, tag)
			}
		}
	})
}

// FuzzCheckpoint decodes a checkpoint key's value: one that decodes
// encodes back to the same bytes.
func FuzzCheckpoint(f *testing.F) {
	f.Add([]byte(encodeCheckpoint(time.UnixMicro(1_700_000_000_000_001), []byte("offset 42"))))
	f.Add([]byte("short"))
	f.Fuzz(func(t *testing.T, v []byte) {
		at, value, ok := decodeCheckpoint(v)
		if !ok {
			return
		}
		if back := encodeCheckpoint(at, value); back != string(v) {
			t.Fatalf("decodeCheckpoint(%q) encodes back as %q", v, back)
		}
	})
}

// FuzzURL parses store URLs with a password: no panic, a malformed URL is
// ErrInvalid, and no error holds the password.
func FuzzURL(f *testing.F) {
	f.Add("etcd", "u", "p@ss", "h:2379", "?prefix=x/", true)
	f.Add("etcds", "", "pw", "[::1]:2379,b:2", "/", true)
	f.Add("etcd", "u", "p/w", "a:1,b:2", "?ca=x", false)
	f.Add("etcds", "u", "p?w", "a:1", "?cert=/nonexistent&key=/nonexistent", false)
	f.Fuzz(func(t *testing.T, scheme, user, pass, host, tail string, escape bool) {
		if strings.Contains(scheme+user+host+tail, secretMark) {
			return
		}
		pass += secretMark
		enc := pass
		if escape {
			enc = url.PathEscape(pass)
		}
		raw := scheme + "://" + user + ":" + enc + "@" + host + tail
		cfg, _, err := parseURL(raw)
		if err != nil {
			if strings.Contains(err.Error(), secretMark) {
				t.Fatalf("parseURL(%q): the error holds the password: %v", raw, err)
			}
			if !errors.Is(err, store.ErrInvalid) {
				t.Fatalf("parseURL(%q): %v; want ErrInvalid", raw, err)
			}
			return
		}
		if slices.ContainsFunc(cfg.Endpoints, func(e string) bool { return strings.Contains(e, secretMark) }) {
			t.Fatalf("parseURL(%q): an endpoint holds the password: %v", raw, cfg.Endpoints)
		}
	})
}
