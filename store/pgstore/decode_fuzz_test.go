package pgstore

import (
	"errors"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
)

// Fuzz targets of what this package decodes from the server: owners rows,
// log rows as notifications carry them, and store URLs (docs/fuzzing.md).

const testSession = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"

// FuzzOwnerRow decodes an owners row: a row that decodes gives back its
// columns, and is a record a snapshot may hold.
func FuzzOwnerRow(f *testing.F) {
	f.Add("p", testSession, "m", "", "5")
	f.Add("p", "", "", "", "1")
	f.Add("p", testSession, "m", testSession, "18446744073709551615")
	f.Add("p", testSession, "m", "", "0")
	f.Add("", "", "m", "x", "-1")
	f.Fuzz(func(t *testing.T, partition, session, member, givenBack, epoch string) {
		o, bad := decodeOwner(partition, session, member, givenBack, epoch)
		if bad != nil {
			return
		}
		want := store.Ownership{Partition: partition, Session: session, Member: member, GivenBack: givenBack, Epoch: o.Epoch}
		e, err := strconv.ParseUint(epoch, 10, 64)
		if !reflect.DeepEqual(o, want) || o.Epoch == 0 || err != nil || e != o.Epoch {
			t.Fatalf("decodeOwner(%q, %q, %q, %q, %q) = %+v", partition, session, member, givenBack, epoch, o)
		}
		if store.ValidateID("partition", partition) != nil || session == "" && member != "" {
			t.Fatalf("decodeOwner accepted %+v", o)
		}
	})
}

// encodeNote writes a notification as the schema's finish function does.
func encodeNote(group string, n note) string {
	var b strings.Builder
	b.WriteString(group + "\x1d" + strconv.FormatUint(n.after.Seq, 10) + "\x1f" + strconv.FormatUint(n.after.Tag, 10))
	kinds := map[store.ChangeKind]int{store.SessionOpened: kindOpened, store.SessionClosed: kindClosed,
		store.SessionExpired: kindExpired, store.Claimed: kindClaimed, store.Released: kindReleased, store.Restored: kindRestored}
	for _, c := range n.cs {
		weight, epoch := "", ""
		if c.Kind == store.SessionOpened {
			weight = strconv.Itoa(c.Weight)
		}
		if c.Epoch != 0 {
			epoch = strconv.FormatUint(c.Epoch, 10)
		}
		at := ""
		if !c.At.IsZero() {
			at = strconv.FormatInt(c.At.UnixMicro(), 10)
		}
		b.WriteString("\x1e" + strings.Join([]string{strconv.FormatUint(c.Version.Seq, 10), strconv.FormatUint(c.Version.Tag, 10),
			strconv.Itoa(kinds[c.Kind]), c.Session, c.Member, weight, c.Partition, epoch, c.GivenBack, at}, "\x1f"))
	}
	return b.String()
}

// FuzzNote decodes a notification's payload (the log entries it carries):
// one that decodes writes back as a payload that decodes the same.
func FuzzNote(f *testing.F) {
	n := note{after: store.Version{Seq: 4, Tag: 9}, cs: []store.Change{
		{Version: store.Version{Seq: 5, Tag: 11}, Kind: store.SessionOpened, Session: testSession, Member: "m", Weight: 2,
			At: time.UnixMicro(1_700_000_000_000_001).UTC()},
		{Version: store.Version{Seq: 6, Tag: 12}, Kind: store.Claimed, Session: testSession, Member: "m", Partition: "p", Epoch: 3,
			At: time.UnixMicro(1_700_000_000_000_001).UTC()},
		{Version: store.Version{Seq: 7, Tag: 13}, Kind: store.Released, Session: testSession, Partition: "p", Epoch: 3, GivenBack: testSession},
		{Version: store.Version{Seq: 8, Tag: 14}, Kind: store.Restored, Partition: "p", Epoch: 4},
		{Version: store.Version{Seq: 9, Tag: 15}, Kind: store.SessionExpired, Session: testSession},
	}}
	f.Add(encodeNote("g", n))
	f.Add("g")
	f.Add("g\x1d1\x1f2\x1e2\x1f3\x1f7\x1f\x1f\x1f\x1f\x1f\x1f")
	// Entries of a schema before the log's time (9 fields), and with it.
	f.Add("g\x1d1\x1f2\x1e2\x1f3\x1f3\x1f" + testSession + "\x1f\x1f\x1f\x1f\x1f")
	f.Add("g\x1d1\x1f2\x1e2\x1f3\x1f3\x1f" + testSession + "\x1f\x1f\x1f\x1f\x1f\x1f1700000000000000")
	f.Fuzz(func(t *testing.T, payload string) {
		group, n, ok := parseNote(payload)
		if !ok {
			return
		}
		again := encodeNote(group, n)
		g2, n2, ok := parseNote(again)
		if !ok || g2 != group || !reflect.DeepEqual(n2, n) {
			t.Fatalf("parseNote(%q) = %q %+v; written back as %q, which decodes as %q %+v (%v)", payload, group, n, again, g2, n2, ok)
		}
	})
}

// FuzzLogRow decodes a log row: no panic, and a change that decodes has
// what its kind needs.
func FuzzLogRow(f *testing.F) {
	f.Add(int16(kindOpened), testSession, "m", int32(1), true, "", "", "", "")
	f.Add(int16(kindClaimed), testSession, "m", int32(0), false, "p", "5", "", "")
	f.Add(int16(kindReleased), testSession, "", int32(0), false, "p", "5", testSession, "")
	f.Add(int16(kindSet), "", "", int32(0), false, "", "", "", "a\x1fb")
	f.Fuzz(func(t *testing.T, kind int16, session, member string, weight int32, hasWeight bool, partition, epoch, givenBack, set string) {
		var w *int32
		if hasWeight {
			w = &weight
		}
		var ids []string
		var weights []int32
		if set != "" {
			ids = strings.Split(set, "\x1f")
			for i := range ids {
				weights = append(weights, int32(i))
			}
		}
		c, err := decodeEntry(store.Version{Seq: 1, Tag: 1}, kind, session, member, w, partition, epoch, givenBack, ids, weights)
		if err != nil {
			return
		}
		switch c.Kind {
		case store.Claimed, store.Released, store.Restored:
			if c.Epoch == 0 || c.Partition == "" {
				t.Fatalf("decodeEntry: %+v", c)
			}
		case store.SessionOpened:
			if c.Weight < 0 || c.Session == "" {
				t.Fatalf("decodeEntry: %+v", c)
			}
		case store.PartitionsSet:
			if len(c.Partitions) != len(ids) {
				t.Fatalf("decodeEntry: %d partitions of %d", len(c.Partitions), len(ids))
			}
		}
	})
}

// secretMark is in every password FuzzURL makes: no error, redacted URL
// or pgx URL's redacted form may hold it.
const secretMark = "Sekr3tMark"

// FuzzURL parses store URLs with a password in the user info or in the
// query (password=, sslpassword=), percent-encoded or not: every error
// wraps ErrInvalid, and holds no password.
func FuzzURL(f *testing.F) {
	f.Add("postgres", "u", "p@ss", "h:5432", "/test?sslmode=disable", uint8(0), true)
	f.Add("postgresql", "", "p/w", "a:1,b:2", "/db?schema=herd", uint8(1), false)
	f.Add("postgres", "u", "p?w", "[::1]", "/db?sslmode=verify-full", uint8(2), true)
	f.Fuzz(func(t *testing.T, scheme, user, pass, host, tail string, where uint8, escape bool) {
		if strings.Contains(scheme+user+host+tail, secretMark) {
			return
		}
		pass += secretMark
		enc := pass
		// In the query, a password is always percent-encoded: an '&' typed
		// as is ends the option, and what follows is another option to any
		// parser (docs/fuzzing.md).
		if escape || where%3 != 0 {
			enc = strings.ReplaceAll(url.QueryEscape(pass), "+", "%2B")
		}
		sep := "?" // a query option is added to the query, or starts it
		if strings.Contains(host+tail, "?") {
			sep = "&"
		}
		var raw string
		switch where % 3 {
		case 0:
			raw = scheme + "://" + user + ":" + enc + "@" + host + tail
		case 1:
			raw = scheme + "://" + user + "@" + host + tail + sep + "password=" + enc
		default:
			raw = scheme + "://" + host + tail + sep + "sslpassword=" + enc
		}
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
