package dashboard

import (
	"slices"
	"strings"
	"time"

	"github.com/herdhq/herd/store"
)

// The ownership history: what the dashboard saw its followers apply, at
// the time the store appended each change (store.Change.At, on the store's
// clock), or, for an entry without one (written by an older herd), when
// the dashboard received it. It reaches back only to when the dashboard
// first followed the group (or to the oldest entry its ring keeps): a
// page says both.

// History bounds: the ring keeps at most maxHistoryEntries entries and at
// most maxHistoryParts partition ids over all of them, whichever is
// reached first (a placement of 100,000 partitions fills it in one go).
const (
	maxHistoryEntries = 4000
	maxHistoryParts   = 20000
)

// History entry kinds.
const (
	histOpen     = "open"     // a session opened
	histClose    = "close"    // a session closed (its member left): Parts are the partitions it still held
	histExpire   = "expire"   // a session expired: Parts are the partitions it held
	histClaim    = "claim"    // Parts claimed by the session
	histRelease  = "release"  // Parts released by the session
	histGiveBack = "giveback" // Parts given back by the session
	histRestore  = "restore"  // Parts' records restored (after the store lost data)
	histSet      = "set"      // the partition set was replaced (Count partitions)
	histGap      = "gap"      // the dashboard (re)read the group: what changed before was not seen
	histRequest  = "request"  // a request logged (Action, for key Parts[0] or for Member)
)

// histEntry is one change, or consecutive changes of one kind by one
// session in one read of the log, as the dashboard saw them.
type histEntry struct {
	Seq  uint64 `json:"seq"`  // the dashboard's own, increasing
	At   int64  `json:"at"`   // Unix ms: when the store appended the change (StoreTime), else when the dashboard received it
	Seen int64  `json:"seen"` // Unix ms when the dashboard received it, on its own clock
	// StoreTime: At is the store's time (the entry had one), not the
	// dashboard's receipt time.
	StoreTime bool     `json:"storeTime"`
	Kind      string   `json:"kind"` // a hist* constant
	Session   string   `json:"session,omitempty"`
	Member    string   `json:"member,omitempty"`
	Parts     []string `json:"parts,omitempty"`
	Count     int      `json:"count"` // partitions: len(Parts), or the set's size for histSet
	Version   string   `json:"version"`
	// Claims only, one per part: the member that ran it before ("" if
	// unknown or none), how it let go (release, giveback, expire, close;
	// "" if unknown), and the takeover: milliseconds from that moment to
	// this claim, both at their At (-1 if the dashboard did not see the
	// first).
	From   []string `json:"from,omitempty"`
	How    []string `json:"how,omitempty"`
	WaitMs []int64  `json:"waitMs,omitempty"`
	// Action is a request's (store.RequestRun, ...).
	Action string `json:"action,omitempty"`
}

// history is one group's ring, kept by the Handler beyond its followers
// (a follower that starts adds a gap). Guarded by Handler.mu.
type history struct {
	entries []histEntry
	parts   int       // len(Parts) summed over entries
	seq     uint64    // of the last entry
	since   time.Time // when the dashboard first followed the group
	dropped bool      // entries were dropped from the front: the ring is full
}

// add appends es, dropping the oldest entries beyond the bounds.
func (hs *history) add(es []histEntry) {
	for i := range es {
		hs.seq++
		es[i].Seq = hs.seq
		hs.parts += len(es[i].Parts)
	}
	hs.entries = append(hs.entries, es...)
	drop := 0
	for len(hs.entries)-drop > maxHistoryEntries || hs.parts > maxHistoryParts && drop < len(hs.entries)-1 {
		hs.parts -= len(hs.entries[drop].Parts)
		drop++
	}
	if drop > 0 {
		hs.dropped = true
		hs.entries = append(hs.entries[:0:0], hs.entries[drop:]...)
	}
}

// historyEvent is the "history" event: the whole ring when a page opens
// (Full), then each follower's new entries.
type historyEvent struct {
	Full bool `json:"full"`
	// Since is when the dashboard began to follow the group (Unix ms);
	// Full is set on a page's first history event.
	Since      int64       `json:"since"`
	Dropped    bool        `json:"dropped"` // older entries were dropped: the ring reaches back to Entries[0]
	MaxEntries int         `json:"maxEntries"`
	MaxParts   int         `json:"maxParts"`
	Entries    []histEntry `json:"entries"`
}

func (hs *history) event(full bool, es []histEntry) *event {
	return encode("history", historyEvent{Full: full, Since: hs.since.UnixMilli(), Dropped: hs.dropped,
		MaxEntries: maxHistoryEntries, MaxParts: maxHistoryParts, Entries: es})
}

// freed is how a partition's last owner let go of it, as a follower saw.
type freed struct {
	at     time.Time
	member string
	how    string
}

// tracker turns the log entries a follower applies into history entries.
// It is the follower's own: a new follower starts with an empty one.
type tracker struct {
	freed   map[string]freed  // partition -> how its last owner let go, until it is claimed
	members map[string]string // session -> member, for sessions that ended in this batch
	out     []histEntry
	now     time.Time
	snap    *store.Snapshot
	batch   map[string]string // partition -> session, records created in this batch (not in snap.Owners yet)
}

func newTracker() *tracker { return &tracker{freed: map[string]freed{}} }

// apply applies cs to snap (as ApplyAll) and returns the history entries
// they make, received at now.
func (t *tracker) apply(snap *store.Snapshot, cs []store.Change, now time.Time) ([]histEntry, error) {
	t.out, t.now, t.snap, t.batch, t.members = nil, now, snap, map[string]string{}, map[string]string{}
	err := snap.ApplyAllFunc(cs, t.seen)
	return t.out, err
}

// seen records c, just before it is applied to t.snap; rec is the index
// of its partition's record in t.snap.Owners (-1: none there).
func (t *tracker) seen(c store.Change, rec int) {
	switch c.Kind {
	case store.SessionOpened:
		t.emit(histOpen, c, nil)
	case store.SessionClosed, store.SessionExpired:
		how := histClose
		if c.Kind == store.SessionExpired {
			how = histExpire
		}
		member := t.memberOf(c.Session)
		t.members[c.Session] = member
		var held []string
		for _, o := range t.snap.Owners {
			if o.Session == c.Session {
				held = append(held, o.Partition)
			}
		}
		for p, s := range t.batch {
			if s == c.Session {
				held = append(held, p)
			}
		}
		for _, p := range held {
			t.freed[p] = freed{t.at(c), member, how}
		}
		e := t.emit(how, store.Change{Kind: c.Kind, Session: c.Session, Member: member, Version: c.Version, At: c.At}, nil)
		e.Parts, e.Count = held, len(held)
	case store.Claimed:
		f, ok := t.freed[c.Partition]
		delete(t.freed, c.Partition)
		if rec < 0 {
			t.batch[c.Partition] = c.Session
		}
		e := t.emit(histClaim, c, &c.Partition)
		if !ok {
			e.From, e.How, e.WaitMs = append(e.From, ""), append(e.How, ""), append(e.WaitMs, -1)
			return
		}
		e.From, e.How = append(e.From, f.member), append(e.How, f.how)
		e.WaitMs = append(e.WaitMs, t.at(c).Sub(f.at).Milliseconds())
	case store.Released:
		kind := histRelease
		if c.GivenBack != "" {
			kind = histGiveBack
		}
		member := t.memberOf(c.Session)
		t.freed[c.Partition] = freed{t.at(c), member, kind}
		delete(t.batch, c.Partition)
		c.Member = member
		t.emit(kind, c, &c.Partition)
	case store.Restored:
		t.emit(histRestore, c, &c.Partition)
	case store.PartitionsSet:
		e := t.emit(histSet, c, nil)
		e.Count = len(c.Partitions)
	case store.Requested:
		e := t.emit(histRequest, c, nil)
		e.Action = c.Action
		if c.Partition != "" {
			e.Parts, e.Count = []string{c.Partition}, 1
		}
	}
}

// memberOf is the member of a session the replica knows.
func (t *tracker) memberOf(session string) string {
	if m, ok := t.members[session]; ok {
		return m
	}
	i, ok := slices.BinarySearchFunc(t.snap.Sessions, session, func(s store.SessionInfo, id string) int {
		return strings.Compare(s.ID, id)
	})
	if !ok {
		return ""
	}
	return t.snap.Sessions[i].Member
}

// at is when c happened as the history tells it: the store's time of the
// entry, or the time the dashboard received it if the entry has none.
func (t *tracker) at(c store.Change) time.Time {
	if c.At.IsZero() {
		return t.now
	}
	return c.At
}

// emit adds c to the last entry if it is of the same kind and session
// (and names a partition) and at the same millisecond (the changes of one
// batch share their time), else starts an entry; it returns the entry.
func (t *tracker) emit(kind string, c store.Change, part *string) *histEntry {
	at := t.at(c).UnixMilli()
	if n := len(t.out); n > 0 && part != nil {
		e := &t.out[n-1]
		if e.Kind == kind && e.Session == c.Session && len(e.Parts) > 0 && e.At == at {
			e.Parts = append(e.Parts, *part)
			e.Count++
			e.Version = c.Version.String()
			return e
		}
	}
	e := histEntry{At: at, Seen: t.now.UnixMilli(), StoreTime: !c.At.IsZero(), Kind: kind, Session: c.Session, Member: c.Member,
		Version: c.Version.String()}
	if part != nil {
		e.Parts, e.Count = []string{*part}, 1
	}
	t.out = append(t.out, e)
	return &t.out[len(t.out)-1]
}
