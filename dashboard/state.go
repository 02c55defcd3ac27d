package dashboard

import (
	"slices"
	"strings"

	"github.com/herdhq/herd/store"
)

// maxNobodyListed bounds the partitions nobody runs that a state lists
// by id (Unowned counts them all).
const maxNobodyListed = 1000

// groupState is a group as the page draws it: the answer of /api/group,
// and the "state" event with its columns packed (wire). The partitions
// are columns (Partitions, Owner, Epoch, one entry per partition of the
// set).
type groupState struct {
	Group   string        `json:"group"`
	Kind    string        `json:"kind"`    // store.KindPartitions, store.KindKeys, "" if unnamed
	Version string        `json:"version"` // the log's version the state shows
	Members []memberState `json:"members"` // live sessions, sorted by session id
	// Sessions are the sessions the records name, live or not: Owner
	// indexes it.
	Sessions   []string `json:"sessions"`
	Partitions []string `json:"partitions"` // the partition set, sorted by id
	Owner      []int    `json:"owner"`      // index in Sessions of the record's session, -1 if none
	Epoch      []uint64 `json:"epoch"`      // the record's epoch, 0 without a record
	// GivenBack lists the records whose GivenBack mark names a live
	// session: members place them on another member while it lives.
	GivenBack []givenBack `json:"givenBack"`
	Unowned   int         `json:"unowned"` // partitions of the set no live session runs
	// NobodyRuns lists up to maxNobodyListed of them, with why.
	NobodyRuns []nobodyRuns      `json:"nobodyRuns"`
	Malformed  []store.Malformed `json:"malformed"`
}

// memberState is one live session.
type memberState struct {
	Session string `json:"session"`
	Member  string `json:"member"`
	Weight  int    `json:"weight"`
	// Owned is the partitions of the set its session runs (in states;
	// deltas leave it 0: the page counts).
	Owned int `json:"owned"`
	// TTLms is the TTL the session had left when the snapshot was read
	// (0 for a session opened since: the log does not carry renewals).
	TTLms int64 `json:"ttlMs,omitempty"`
}

// givenBack is a partition given back by a live session.
type givenBack struct {
	ID      string `json:"id"`
	Session string `json:"session"`
}

// nobodyRuns is a partition of the set that no live session runs.
type nobodyRuns struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

// Reasons a partition has no live owner.
const (
	reasonNoMember     = "no member is alive"
	reasonGivenBack    = "given back by its owner, which lives: waiting for another member"
	reasonNeverClaimed = "never claimed"
	reasonReleased     = "released, not claimed again yet"
	reasonOwnerGone    = "its owner's session ended"
	reasonMalformed    = "its record is malformed: no member claims it until it is repaired"
)

// newGroupState describes snap (which it does not change).
func newGroupState(group string, snap *store.Snapshot) *groupState {
	g := &groupState{
		Group: group, Kind: snap.Kind, Version: snap.Version.String(),
		Members:    members(snap),
		Sessions:   []string{},
		Partitions: make([]string, len(snap.Partitions)),
		Owner:      make([]int, len(snap.Partitions)),
		Epoch:      make([]uint64, len(snap.Partitions)),
		GivenBack:  []givenBack{},
		NobodyRuns: []nobodyRuns{},
		Malformed:  snap.Malformed,
	}
	if g.Malformed == nil {
		g.Malformed = []store.Malformed{}
	}
	badRecord := map[string]bool{}
	for _, m := range snap.Malformed {
		if m.Kind == store.MalformedOwnership {
			badRecord[m.ID] = true
		}
	}
	sessionIndex := map[string]int{}
	owned := map[string]int{}
	o := 0 // Owners and Partitions are both sorted by id: walk them together
	for i, p := range snap.Partitions {
		g.Partitions[i], g.Owner[i] = p.ID, -1
		for o < len(snap.Owners) && snap.Owners[o].Partition < p.ID {
			o++
		}
		var rec *store.Ownership
		if o < len(snap.Owners) && snap.Owners[o].Partition == p.ID {
			rec = &snap.Owners[o]
			g.Epoch[i] = rec.Epoch
			if rec.GivenBack != "" && snap.Alive(rec.GivenBack) {
				g.GivenBack = append(g.GivenBack, givenBack{p.ID, rec.GivenBack})
			}
			if rec.Session != "" {
				k, ok := sessionIndex[rec.Session]
				if !ok {
					k = len(g.Sessions)
					sessionIndex[rec.Session] = k
					g.Sessions = append(g.Sessions, rec.Session)
				}
				g.Owner[i] = k
			}
		}
		if rec != nil && rec.Session != "" && snap.Alive(rec.Session) {
			owned[rec.Session]++
			continue
		}
		g.Unowned++
		if len(g.NobodyRuns) < maxNobodyListed {
			g.NobodyRuns = append(g.NobodyRuns, nobodyRuns{p.ID, nobodyReason(snap, rec, badRecord[p.ID])})
		}
	}
	for i := range g.Members {
		g.Members[i].Owned = owned[g.Members[i].Session]
	}
	return g
}

// nobodyReason says why a partition with record rec (nil: none) has no
// live owner in snap.
func nobodyReason(snap *store.Snapshot, rec *store.Ownership, malformed bool) string {
	switch {
	case malformed:
		return reasonMalformed
	case len(snap.Sessions) == 0:
		return reasonNoMember
	case rec != nil && rec.Session == "" && rec.GivenBack != "" && snap.Alive(rec.GivenBack):
		return reasonGivenBack
	case rec == nil:
		return reasonNeverClaimed
	case rec.Session == "":
		return reasonReleased
	}
	return reasonOwnerGone
}

// members lists snap's live sessions.
func members(snap *store.Snapshot) []memberState {
	ms := make([]memberState, len(snap.Sessions))
	for i, s := range snap.Sessions {
		ms[i] = memberState{Session: s.ID, Member: s.Member, Weight: max(s.Weight, 1), TTLms: s.Remaining.Milliseconds()}
	}
	return ms
}

// groupDelta is the "delta" event: what a batch of log entries changed,
// applied by the page to the last state. A batch that replaces the
// partition set is sent as a new state instead.
type groupDelta struct {
	Version string        `json:"version"`
	Members []memberState `json:"members"` // every live session after the batch
	Parts   []partDelta   `json:"parts"`   // the records the batch changed, once each
}

// partDelta is one partition's record after a batch.
type partDelta struct {
	ID        string `json:"id"`
	Session   string `json:"session"` // "" if released
	Member    string `json:"member"`
	Epoch     uint64 `json:"epoch"`
	GivenBack string `json:"givenBack,omitempty"` // the record's GivenBack mark
}

// newDelta describes what cs, applied to snap, changed: snap is the
// state after them.
func newDelta(snap *store.Snapshot, cs []store.Change) *groupDelta {
	d := &groupDelta{Version: snap.Version.String(), Members: members(snap), Parts: []partDelta{}}
	for i := range d.Members {
		d.Members[i].TTLms = 0 // as of the snapshot, stale now: the log carries no renewals
	}
	var ids []string
	for _, c := range cs {
		if c.Partition != "" {
			ids = append(ids, c.Partition)
		}
	}
	slices.SortFunc(ids, strings.Compare)
	for _, id := range slices.Compact(ids) {
		if i, ok := snap.RecordIndex(id); ok {
			r := snap.Owners[i]
			d.Parts = append(d.Parts, partDelta{ID: id, Session: r.Session, Member: r.Member, Epoch: r.Epoch, GivenBack: r.GivenBack})
		}
	}
	return d
}

// setChanged reports whether cs replaces the partition set.
func setChanged(cs []store.Change) bool {
	return slices.ContainsFunc(cs, func(c store.Change) bool { return c.Kind == store.PartitionsSet })
}
