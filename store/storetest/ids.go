package storetest

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/herdhq/herd/store"
)

// unusualIDs are valid ids (store.ValidateID accepts them) that break
// backends which build keys, channel names, patterns, scripts or queries by
// pasting strings: separators, Redis cluster hash tags and glob characters,
// Lua and SQL quoting and format characters, Unicode, and ids of exactly
// MaxIDLength bytes.
func unusualIDs() []string {
	return []string{
		"with space", " leading", "trailing ", "a:b:c", "::", "a/b/c", "/", "a\\b",
		"{tag}", "{", "}", "{}", "[x]", "[", "*", "?", "a*b?c[d]",
		"100%", "%s%d%%", `"quoted"`, "'single'", "`tick`", "]]", "[[", "[=[",
		"--comment", "a;b", "$1", "#", "&=+~!@^|<>,.", "\\x00", "null", "nil",
		"ünïcödé", "日本語", "emoji 🎉", "\u00a0nbsp", "zero\u200bwidth", "ls\u2028ps", "\ufffd",
		strings.Repeat("x", store.MaxIDLength),
		strings.Repeat("é", store.MaxIDLength/2),
	}
}

// malformedIDs are ids store.ValidateID rejects.
func malformedIDs() []string {
	return []string{
		"", "new\nline", "cr\rx", "tab\tx", "nul\x00x", "del\x7fx", "esc\x1b[0m",
		"\xff\xfe", "cut utf8 \xc3",
		strings.Repeat("x", store.MaxIDLength+1),
		strings.Repeat("é", store.MaxIDLength/2) + "x",
	}
}

// groupWith returns base/suffix, cut at a rune boundary and padded with
// 'x' to exactly MaxIDLength bytes if it is longer than that.
func groupWith(base, suffix string) string {
	g := base + "/" + suffix
	if len(g) <= store.MaxIDLength {
		return g
	}
	cut := g[:store.MaxIDLength]
	for !utf8.ValidString(cut) {
		cut = cut[:len(cut)-1]
	}
	return cut + strings.Repeat("x", store.MaxIDLength-len(cut))
}

// testUnusualIDs: unusual ids work as member, partition and group ids, come
// back unchanged and sorted, and do not leak into other groups' feeds.
func testUnusualIDs(e *env) {
	t := e.t
	ids := unusualIDs()
	for _, id := range ids {
		if err := store.ValidateID("test", id); err != nil {
			t.Fatalf("suite bug: %s should be valid: %v", quote(id), err)
		}
	}

	// As member and partition ids in one group.
	set := make([]store.Partition, len(ids))
	for i, id := range ids {
		set[i] = store.Partition{ID: id}
	}
	if _, err := e.s.SetPartitions(e.ctx, e.group, store.PartitionSet{Partitions: set}); err != nil {
		t.Fatalf("SetPartitions with unusual ids: %v; want nil", err)
	}
	sessions := make([]string, len(ids))
	for i, id := range ids {
		sessions[i] = e.open(id, longTTL)
		o := e.claim(id, sessions[i])
		if o.Member != id {
			t.Fatalf("Claim of partition %s by member %s returned Member %s; want it unchanged", quote(id), quote(id), quote(o.Member))
		}
		e.checkpoint(id, o.Epoch, id)
	}
	s := e.snap()
	checkSorted(t, s)
	if got, want := partitionIDs(s.Partitions), sortedCopy(ids); fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
		t.Fatalf("Snapshot.Partitions = %q; want %q", got, want)
	}
	for i, id := range ids {
		o, ok := findOwner(s, id)
		if !ok || o.Session != sessions[i] || o.Member != id {
			t.Fatalf("record of partition %s = %s (found %v); want session %q and member equal to the id", quote(id), fmtOwner(o), ok, sessions[i])
		}
		e.wantCheckpoint(id, sessions[i], id, "partition "+quote(id))
		si, ok := findSession(s, sessions[i])
		if !ok || si.Member != id {
			t.Fatalf("session %q of member %s = %+v (found %v); want the member id unchanged", sessions[i], quote(id), si, ok)
		}
	}
	for i, id := range ids {
		e.release(id, sessions[i], e.mustRecord(id).Epoch)
		e.close(sessions[i])
	}

	// As group ids, all sharing one prefix so that a glob or prefix match
	// between groups would show, each with its own log.
	base := newGroup(t, "")
	groups := make([]string, len(ids))
	for i, id := range ids {
		groups[i] = groupWith(base, id)
	}
	members := make([]string, len(ids))
	opened := make([]store.Version, len(ids))
	for i, g := range groups {
		members[i] = e.openIn(g, "member", 1, longTTL)
		opened[i] = e.snapOf(g).Version
		if _, err := e.s.SetPartitions(e.ctx, g, store.PartitionSet{Partitions: []store.Partition{{ID: "p"}}}); err != nil {
			t.Fatalf("SetPartitions in group %s: %v", quote(g), err)
		}
		o := e.claimIn(g, "p", members[i])
		if err := e.s.Checkpoint(e.ctx, g, "p", o.Epoch, []byte(g)); err != nil {
			t.Fatalf("Checkpoint in group %s: %v", quote(g), err)
		}
	}
	for i, g := range groups {
		s := e.snapOf(g)
		if len(s.Sessions) != 1 || s.Sessions[0].ID != members[i] {
			t.Fatalf("group %s lists sessions %+v; want only its own %q", quote(g), s.Sessions, members[i])
		}
		if len(s.Owners) != 1 || s.Owners[0].Session != members[i] {
			t.Fatalf("group %s has records %+v; want one, owned by %q", quote(g), s.Owners, members[i])
		}
		// Its log holds its own changes after its session's opening: the
		// partition set and the claim, none of another group's.
		cs := e.readLogOf(g, opened[i], s.Version)
		if len(cs) != 2 || cs[0].Kind != store.PartitionsSet || cs[1].Kind != store.Claimed || cs[1].Session != members[i] {
			t.Fatalf("group %s logged %+v after its session opened; want its partition set and its claim of p", quote(g), cs)
		}
		if o := e.claimIn(g, "p", members[i]); string(o.Checkpoint) != g {
			t.Fatalf("group %s: Claim returned checkpoint %q; want its own %q", quote(g), o.Checkpoint, g)
		}
	}
}

// testMalformedIDs: every method rejects a malformed group, member or
// partition id with ErrInvalid, and changes nothing.
func testMalformedIDs(e *env) {
	t := e.t
	s := e.open("member", longTTL)
	e.setPartitions("p")
	o := e.claim("p", s)
	ctx := e.ctx
	for _, bad := range malformedIDs() {
		if store.ValidateID("test", bad) == nil {
			t.Fatalf("suite bug: %s should be invalid", quote(bad))
		}
		calls := map[string]func() error{
			"OpenSession(group)": func() error { _, err := e.s.OpenSession(ctx, bad, "m", 1, time.Second); return err },
			"OpenSession(member)": func() error {
				_, err := e.s.OpenSession(ctx, e.group, bad, 1, time.Second)
				return err
			},
			"KeepAlive(group)":    func() error { return keepErr(e.s.KeepAlive(ctx, bad, s, time.Second)) },
			"CloseSession(group)": func() error { return e.s.CloseSession(ctx, bad, s) },
			"SetPartitions(group)": func() error {
				_, err := e.s.SetPartitions(ctx, bad, store.PartitionSet{Partitions: []store.Partition{{ID: "p"}}})
				return err
			},
			"SetPartitions(partition)": func() error {
				_, err := e.s.SetPartitions(ctx, e.group, store.PartitionSet{Partitions: []store.Partition{{ID: bad}}})
				return err
			},
			"Snapshot(group)":       func() error { _, err := e.s.Snapshot(ctx, bad); return err },
			"Claim(group)":          func() error { _, err := store.Claim(ctx, e.s, bad, "p", s); return err },
			"Claim(partition)":      func() error { _, err := store.Claim(ctx, e.s, e.group, bad, s); return err },
			"Release(group)":        func() error { return store.Release(ctx, e.s, bad, "p", s, o.Epoch) },
			"Release(partition)":    func() error { return store.Release(ctx, e.s, e.group, bad, s, o.Epoch) },
			"GiveBack(group)":       func() error { return e.s.GiveBack(ctx, bad, "p", s, o.Epoch) },
			"GiveBack(partition)":   func() error { return e.s.GiveBack(ctx, e.group, bad, s, o.Epoch) },
			"Checkpoint(group)":     func() error { return e.s.Checkpoint(ctx, bad, "p", o.Epoch, []byte("x")) },
			"Checkpoint(partition)": func() error { return e.s.Checkpoint(ctx, e.group, bad, o.Epoch, []byte("x")) },
		}
		for name, call := range calls {
			wantErr(t, call(), store.ErrInvalid, fmt.Sprintf("%s with id %s", name, quote(bad)), "store.ValidateID rejects the id")
		}
	}
	snap := e.snap()
	if !snap.Alive(s) || len(snap.Sessions) != 1 {
		t.Fatalf("after rejected calls the sessions are %+v; want only %q, alive", snap.Sessions, s)
	}
	if got := partitionIDs(snap.Partitions); len(got) != 1 || got[0] != "p" {
		t.Fatalf("after rejected calls the partition set is %q; want [p]", got)
	}
	if got, _ := findOwner(snap, "p"); !sameOwner(got, o) || len(snap.Owners) != 1 {
		t.Fatalf("after rejected calls the records are %+v; want only %s", snap.Owners, fmtOwner(o))
	}
}

// testCancelledContext: every method returns an error promptly when its
// context is already cancelled or past its deadline.
func testCancelledContext(e *env) {
	t := e.t
	s := e.open("member", longTTL)
	o := e.claim("p", s)
	cancelled, cancel := context.WithCancel(e.ctx)
	cancel()
	expired, cancel2 := context.WithDeadline(e.ctx, time.Now().Add(-time.Second))
	defer cancel2()
	v := e.snap().Version
	for ctxName, ctx := range map[string]context.Context{"cancelled": cancelled, "past its deadline": expired} {
		calls := map[string]func() error{
			"OpenSession":  func() error { _, err := e.s.OpenSession(ctx, e.group, "m", 1, time.Second); return err },
			"KeepAlive":    func() error { return keepErr(e.s.KeepAlive(ctx, e.group, s, longTTL)) },
			"CloseSession": func() error { return e.s.CloseSession(ctx, e.group, "no-such-session") },
			"SetPartitions": func() error {
				_, err := e.s.SetPartitions(ctx, e.group, store.PartitionSet{Partitions: []store.Partition{{ID: "p"}}})
				return err
			},
			"Snapshot":   func() error { _, err := e.s.Snapshot(ctx, e.group); return err },
			"Records":    func() error { _, err := e.s.Records(ctx, e.group, []string{"p"}); return err },
			"Claim":      func() error { _, err := store.Claim(ctx, e.s, e.group, "q", s); return err },
			"Release":    func() error { return store.Release(ctx, e.s, e.group, "p", s, o.Epoch+1) },
			"GiveBack":   func() error { return e.s.GiveBack(ctx, e.group, "p", s, o.Epoch+1) },
			"Checkpoint": func() error { return e.s.Checkpoint(ctx, e.group, "p", o.Epoch, []byte("x")) },
			"Changes":    func() error { _, _, err := e.s.Changes(ctx, e.group, v, 1); return err },
		}
		for name, call := range calls {
			start := time.Now()
			err := call()
			if took := time.Since(start); took > promptly {
				t.Fatalf("%s with a %s context took %v; want it to return within %v", name, ctxName, took, promptly)
			}
			if err == nil {
				t.Fatalf("%s with a %s context returned nil; want an error", name, ctxName)
			}
		}
	}
}
