package pgstore

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/herdhq/herd/store"
)

// Wake-ups of Changes. Every function that appends to a group's log sends
// pg_notify(<schema>_changes, <group>) in the same transaction, so the
// notification goes out when the entries are committed, and only then
// (renewals and checkpoints log nothing and notify nothing). One
// connection per store, outside the pool, LISTENs on the channel and wakes
// the Changes calls waiting on that group; they read the log table again.
//
// The notifications of a change carry its entries when there are at most
// 1,000 and none is a partition set (see finish in schema.go): in notes of
// under 7,500 bytes, each with the version its entries follow (a batch of
// 625 claims takes 10 notes). The hub keeps the last notes of each group a
// reader waited on lately, and a reader whose version is one a note
// follows, or one inside a note, takes the entries from there without
// reading the table: in a fleet's first placement every member process's
// reader would otherwise read every claim's rows, 16 processes x 625 rows
// per claim, about 4 ms of server time each (BenchmarkReadLog625), while
// the claims wait for the CPU on the group's lock. A waiting reader takes a
// batch of 625 with no read of the table (TestNotificationsCarryABatch);
// the fleet figures are in docs/benchmarks.md. Any other notification of the
// group (a partition set, a deleted group) drops the group's notes, and
// readers read the table.
//
// The connection is checked when it is made: a notification the store
// sends itself must come back within listenVerify. Behind a pooler in
// transaction mode it never does (LISTEN runs on whichever server
// connection the pooler picked, and that one goes back to the pooler), and
// the store falls back to polling. While the connection is down, waiting
// calls read every poll interval; when it is back (and checked), every
// waiting call reads once at once, from its own last version, so nothing
// notified in between is missed. While it is up, a waiting call still
// reads every backstop interval.
//
// A call of the store's that fails on the network or its deadline makes
// the LISTEN connection suspect (suspect): it crossed the same network, so
// it may be cut too, or hold notifications that the server's TCP sends
// again only after a back-off of seconds once the network is back. The
// store stops trusting it at once (waiting calls read every poll
// interval) and replaces it with a new one, checked as any new one.
const (
	listenVerify    = 5 * time.Second  // a LISTEN connection's own notification must come back within this
	listenIdle      = 30 * time.Second // a LISTEN connection idle this long is pinged
	listenRetryMax  = 5 * time.Second  // longest pause between attempts to reconnect
	listenRetryFail = time.Minute      // pause after LISTEN was found not to work
	pingPrefix      = "\x01herd-ping " // payloads of the store's own checks (group ids have no control characters)
	notesKept       = 64               // notes kept per group
	notesInterest   = time.Minute      // notes are kept for groups a reader waited on this recently
)

// note is one notification's entries, and the version they follow.
type note struct {
	after store.Version
	cs    []store.Change
}

var errListenUnverified = errors.New("LISTEN does not deliver notifications on this connection (a pooler in transaction mode?)")

// errListenSuspect ends a LISTEN connection made suspect by a failed call.
var errListenSuspect = errors.New("a call of the store failed on the network: the LISTEN connection is replaced")

type hub struct {
	s       *Store
	connCfg *pgx.ConnConfig
	// listenOn is the channel the connection LISTENs on: the store's
	// (tests name another to see LISTEN fail its check).
	listenOn string
	verify   time.Duration // listenVerify (tests shorten it)

	mu       sync.Mutex
	waits    map[string]chan struct{} // closed by the group's next notification
	notes    map[string][]note        // the group's last notes, oldest first
	latest   map[string]store.Version // the version the group's last note ends at
	interest map[string]time.Time     // when a reader last waited on the group
	healthy  bool                     // a checked LISTEN connection is up
	pid      uint32                   // its backend's process id
	started  bool
	closed   bool
	warned   bool
	cancel   context.CancelFunc
	done     chan struct{}
	// interrupt ends the checked connection's wait for a notification
	// (nil while there is none); suspected says why.
	interrupt context.CancelFunc
	suspected bool
}

func newHub(s *Store, cfg *pgx.ConnConfig) *hub {
	return &hub{s: s, connCfg: cfg, listenOn: s.channel, verify: listenVerify,
		waits: map[string]chan struct{}{}, notes: map[string][]note{}, latest: map[string]store.Version{}, interest: map[string]time.Time{}}
}

// wait returns a channel closed at the group's next notification (or when
// the LISTEN connection changes state), starting the listener on first use.
func (h *hub) wait(group string) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.s.cfg.listen && !h.started && !h.closed {
		h.started = true
		ctx, cancel := context.WithCancel(context.Background())
		h.cancel, h.done = cancel, make(chan struct{})
		go h.run(ctx)
	}
	h.interest[group] = time.Now()
	ch := h.waits[group]
	if ch == nil {
		ch = make(chan struct{})
		h.waits[group] = ch
	}
	return ch
}

// interval is how long a waiting call waits before it reads again anyway.
func (h *hub) interval() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.healthy {
		return h.s.cfg.backstop
	}
	return h.s.cfg.poll
}

func (h *hub) wakeAllLocked() {
	for g, ch := range h.waits {
		close(ch)
		delete(h.waits, g)
	}
	clear(h.notes)
	clear(h.latest)
}

// upToDate reports whether after is the version the group's last
// notification announced: then there is nothing to read until the next
// one (notifications arrive in commit order, and any the hub may have
// missed cleared what it knew).
func (h *hub) upToDate(group string, after store.Version) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	v, ok := h.latest[group]
	return ok && h.healthy && v == after && after.Seq != 0
}

// cached returns the entries after after that notifications brought, if
// the first of them follows after: up to max, chaining notes. A reader
// may be inside a note (its last call took part of it: a batch of 625
// claims comes in notes of about 60 entries, and a reader asks for up to
// max), and goes on from there.
func (h *hub) cached(group string, after store.Version, max int) []store.Change {
	if after.Seq == 0 {
		return nil // the zero version is never continued (store.Store.Changes)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []store.Change
	v := after
	for _, n := range h.notes[group] {
		from := 0
		if n.after != v {
			// Entries of a note have consecutive sequence numbers
			// (parseNote).
			i := v.Seq - n.after.Seq // v is n.cs[i-1] if within the note
			if v.Seq <= n.after.Seq || i > uint64(len(n.cs)) || n.cs[i-1].Version != v {
				continue
			}
			from = int(i)
		}
		rest := n.cs[from:]
		if len(rest) == 0 {
			continue
		}
		take := rest[:min(len(rest), max-len(out))]
		out = append(out, take...)
		if len(out) == max || len(take) < len(rest) {
			break
		}
		v = n.cs[len(n.cs)-1].Version
	}
	return out
}

// dispatch handles one notification: it keeps the note of a group a
// reader waited on lately, and wakes the group's readers.
func (h *hub) dispatch(payload string) {
	if strings.HasPrefix(payload, pingPrefix) {
		return
	}
	group, n, ok := parseNote(payload)
	h.mu.Lock()
	defer h.mu.Unlock()
	switch t, interested := h.interest[group]; {
	case interested && time.Since(t) > notesInterest:
		delete(h.interest, group)
		delete(h.notes, group)
		delete(h.latest, group)
	case !interested:
	case ok:
		ns := append(h.notes[group], n)
		if len(ns) > notesKept {
			ns = slices.Delete(ns, 0, len(ns)-notesKept)
		}
		h.notes[group] = ns
		h.latest[group] = n.cs[len(n.cs)-1].Version
	default:
		// a change the notification does not carry
		delete(h.notes, group)
		delete(h.latest, group)
	}
	if ch := h.waits[group]; ch != nil {
		close(ch)
		delete(h.waits, group)
	}
}

// parseNote decodes a notification: the group, and the entries if it
// carries them (see finish in schema.go).
func parseNote(payload string) (group string, n note, ok bool) {
	group, rest, found := strings.Cut(payload, "\x1d")
	if !found {
		return group, note{}, false
	}
	recs := strings.Split(rest, "\x1e")
	if len(recs) < 2 {
		return group, note{}, false
	}
	head := strings.Split(recs[0], "\x1f")
	if len(head) != 2 {
		return group, note{}, false
	}
	seq, err1 := strconv.ParseUint(head[0], 10, 64)
	tag, err2 := strconv.ParseUint(head[1], 10, 64)
	if err1 != nil || err2 != nil {
		return group, note{}, false
	}
	n.after = store.Version{Seq: seq, Tag: tag}
	v := n.after
	for _, r := range recs[1:] {
		// 10 fields, the last the entry's time (µs, "" if unknown); 9 from
		// a schema before the log's time.
		f := strings.Split(r, "\x1f")
		if len(f) != 9 && len(f) != 10 {
			return group, note{}, false
		}
		seq, err1 := strconv.ParseUint(f[0], 10, 64)
		tag, err2 := strconv.ParseUint(f[1], 10, 64)
		kind, err3 := strconv.ParseInt(f[2], 10, 16)
		if err1 != nil || err2 != nil || err3 != nil || seq != v.Seq+1 {
			return group, note{}, false
		}
		var weight *int32
		if f[5] != "" {
			w, err := strconv.ParseInt(f[5], 10, 32)
			if err != nil {
				return group, note{}, false
			}
			w32 := int32(w)
			weight = &w32
		}
		c, err := decodeEntry(store.Version{Seq: seq, Tag: tag}, int16(kind), f[3], f[4], weight, f[6], f[7], f[8], nil, nil)
		if err != nil || c.Kind == store.PartitionsSet {
			return group, note{}, false
		}
		if len(f) == 10 && f[9] != "" {
			us, err := strconv.ParseInt(f[9], 10, 64)
			if err != nil {
				return group, note{}, false
			}
			c.At = logTime(us)
		}
		n.cs = append(n.cs, c)
		v = c.Version
	}
	return group, n, true
}
