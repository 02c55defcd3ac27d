package redisstore

import (
	"strings"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
)

// A Released entry has four fields, or five when it was a GiveBack; an
// entry written before GiveBack existed reads as a plain release.
func TestDecodeReleasedGivenBack(t *testing.T) {
	v := store.Version{Seq: 3, Tag: 9}
	for _, tc := range []struct {
		entry, want string
		bad         bool
	}{
		{entry: "R\np\nS\n5", want: ""},
		{entry: "R\np\nS\n5\nS", want: "S"},
		{entry: "R\np\nS\n5\n", bad: true},
		{entry: "R\np\nS\n5\nS\nx", bad: true},
	} {
		c, err := decodeChange(v, tc.entry)
		if tc.bad {
			if err == nil {
				t.Errorf("decodeChange(%q) = %+v; want an error", tc.entry, c)
			}
			continue
		}
		if err != nil || c.Kind != store.Released || c.Partition != "p" || c.Session != "S" || c.Epoch != 5 || c.GivenBack != tc.want {
			t.Errorf("decodeChange(%q) = %+v, %v; want Released p by S at 5 with GivenBack %q", tc.entry, c, err, tc.want)
		}
	}
}

// The GivenBack mark lives in its own hash: records written before it
// existed read as unmarked, the giver's claim deletes the field (the hash
// holds only live marks of partitions not taken back), and a mark written by
// something else (not a session id) reads as none without failing a read or
// a claim.
func TestGiveBackMarkStorage(t *testing.T) {
	s, raw := newTestStore(t)
	ctx := ctxT(t)
	const g = "giveback"
	k := s.keys(g)
	a, err := s.OpenSession(ctx, g, "a", 1, time.Minute)
	must(t, err, "OpenSession a")
	b, err := s.OpenSession(ctx, g, "b", 1, time.Minute)
	must(t, err, "OpenSession b")

	// A record as an older version wrote it: no givenback field.
	must(t, raw.HSet(ctx, k.owners, "old", "7::").Err(), "HSET owners old")
	o, err := store.Claim(ctx, s, g, "old", a)
	must(t, err, "Claim of an old record")
	if o.GivenBack != "" {
		t.Fatalf("Claim of a record without a mark returned GivenBack %q", o.GivenBack)
	}

	must(t, s.GiveBack(ctx, g, "old", a, o.Epoch), "GiveBack")
	if v, _ := raw.HGet(ctx, k.givenback, "old").Result(); v != a {
		t.Fatalf("givenback field after GiveBack is %q; want the session %q", v, a)
	}
	ob, err := store.Claim(ctx, s, g, "old", b)
	must(t, err, "Claim by another session")
	if ob.GivenBack != a {
		t.Fatalf("Claim by another session returned GivenBack %q; want %q", ob.GivenBack, a)
	}
	must(t, s.GiveBack(ctx, g, "old", b, ob.Epoch), "GiveBack by b")
	_, err = store.Claim(ctx, s, g, "old", b)
	must(t, err, "Claim by the giver")
	if n, _ := raw.HExists(ctx, k.givenback, "old").Result(); n {
		t.Fatal("the giver's claim left the givenback field; want it deleted")
	}

	// A mark written by hand.
	must(t, raw.HSet(ctx, k.owners, "hand", "9::").Err(), "HSET owners hand")
	must(t, raw.HSet(ctx, k.givenback, "hand", "not a session").Err(), "HSET givenback hand")
	snap, err := s.Snapshot(ctx, g)
	must(t, err, "Snapshot with a foreign mark")
	if len(snap.Malformed) != 0 {
		t.Fatalf("a foreign mark made records malformed: %+v", snap.Malformed)
	}
	for _, o := range snap.Owners {
		if o.GivenBack != "" {
			t.Fatalf("record %+v has a mark; want none (the foreign one is moot)", o)
		}
	}
	oh, err := store.Claim(ctx, s, g, "hand", a)
	must(t, err, "Claim of a record with a foreign mark")
	if oh.GivenBack != "" {
		t.Fatalf("Claim of a record with a foreign mark returned GivenBack %q; want none", oh.GivenBack)
	}
}

// Every kind of entry decodes with its number of fields and fails with one
// more or one fewer (fields splits without allocating, up to one field
// more than any kind but a partition set has).
func TestDecodeChangeFields(t *testing.T) {
	v := store.Version{Seq: 3, Tag: 9}
	for _, tc := range []struct {
		entry string
		kind  store.ChangeKind
	}{
		{"O\nS\n1:m", store.SessionOpened},
		{"X\nS", store.SessionClosed},
		{"E\nS", store.SessionExpired},
		{"C\np\nS\n5\nm", store.Claimed},
		{"R\np\nS\n5", store.Released},
		{"T\np\n5", store.Restored},
		{"P", store.PartitionsSet},
		{"P\np\n1\nq\n0", store.PartitionsSet},
	} {
		if c, err := decodeChange(v, tc.entry); err != nil || c.Kind != tc.kind {
			t.Errorf("decodeChange(%q) = %v, %v; want kind %v", tc.entry, c.Kind, err, tc.kind)
		}
		bads := []string{tc.entry + "\nx"}
		if i := strings.LastIndexByte(tc.entry, '\n'); i >= 0 {
			bads = append(bads, tc.entry[:i])
		}
		for _, bad := range bads {
			if tc.kind == store.Released && strings.Count(bad, "\n") == 4 {
				continue // a give-back: five fields
			}
			if c, err := decodeChange(v, bad); err == nil {
				t.Errorf("decodeChange(%q) = %+v; want an error", bad, c)
			}
		}
	}
	if _, err := decodeChange(v, "C\np\nS\n5\nm\nx\ny\nz"); err == nil {
		t.Error("a claim of eight fields decoded")
	}
}
