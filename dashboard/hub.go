package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/herdhq/herd/store"
)

// A hub is one group's follower and the event streams of the pages that
// show the group. The follower reads one snapshot, then the group's log
// from its version, and sends each batch of entries to every page as one
// event: so the store sees one reader per group whatever the number of
// pages. It lives while the group has pages, and Handler.linger after the
// last one (pages.go). Every field is guarded by Handler.mu.
type hub struct {
	group string
	subs  map[*sub]bool
	// state is the last "state" event and deltas the "delta" events
	// since: what a page that opens now is sent first. The follower
	// folds the deltas into a new state every maxReplay of them.
	state  *event
	deltas []*event
	// refresh is the refresher's last "refresh" event, sent to a page
	// that opens.
	refresh *event
	stop    context.CancelFunc
	// ready is closed when the follower has published its first state:
	// the refresher's first read waits for it, so that a group's first
	// snapshot is not read twice at once.
	ready     chan struct{}
	readyOnce sync.Once
	firstRead time.Duration // how long the follower's first snapshot read took (set before ready closes)
	// refreshDue is when the refresher reads next: a page that opens
	// after it, on a hub that had no page, is not sent the last refresh
	// (its TTLs are older than the page would think).
	refreshDue time.Time
	// idle stops the hub when it has had no page for Handler.linger;
	// idleGen tells a timer that fired from one that was stopped or
	// replaced meanwhile.
	idle    *time.Timer
	idleGen int
	// paged has a value when a page opens on a hub that had none: the
	// refresher waits for it while no page is open.
	paged chan struct{}
}

// maxReplay bounds the deltas kept after the last state.
const maxReplay = 64

// subBuffer is how many events a page may fall behind before its stream
// is closed (the browser reconnects and starts from the state again). A
// page that opens is sent a state, up to maxReplay deltas, the history
// and the last refresh.
const subBuffer = maxReplay + 64

// sub is one open event stream. The hub closes ch when it drops the page.
type sub struct{ ch chan *event }

// event is one server-sent event, its data encoded once for every page.
type event struct {
	name string // state, delta or problem
	data []byte
}

// publish sends ev to every page of hb; a page whose buffer is full is
// dropped. A state replaces what new pages are sent first; a delta is
// added to it.
func (h *Handler) publish(hb *hub, ev *event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch ev.name {
	case "state":
		hb.state, hb.deltas = ev, nil
		hb.readyOnce.Do(func() { close(hb.ready) })
	case "delta":
		hb.deltas = append(hb.deltas, ev)
	}
	h.send(hb, ev)
}

// send sends ev to every page of hb; a page whose buffer is full is
// dropped. The caller holds h.mu.
func (h *Handler) send(hb *hub, ev *event) {
	for s := range hb.subs {
		select {
		case s.ch <- ev:
		default:
			close(s.ch)
			delete(hb.subs, s)
		}
	}
}

// replayFull reports whether hb keeps as many deltas as it may.
func (h *Handler) replayFull(hb *hub) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(hb.deltas) >= maxReplay
}

// setState makes ev what new pages are sent first, without sending it to
// the open ones (they have applied the deltas it folds in).
func (h *Handler) setState(hb *hub, ev *event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	hb.state, hb.deltas = ev, nil
}

// follow is hb's follower: it keeps a copy of the group (a snapshot, then
// the log applied to it) and publishes every change, until ctx ends. On
// store.ErrVersionGone (the log was trimmed, or the group deleted) it
// reads a new snapshot; on another error it waits h.retry and tries again.
func (h *Handler) follow(ctx context.Context, hb *hub) {
	defer h.wg.Done()
	var snap *store.Snapshot
	var tr *tracker
	// own is whether snap is the follower's copy: a store's snapshot is
	// read-only. It is copied when the first entry is applied, after the
	// first state is sent.
	own := false
	gone := false // the last snapshot's version was gone at once: wait before the next
	for ctx.Err() == nil {
		if snap == nil {
			start := time.Now()
			s, err := h.st.Snapshot(ctx, hb.group)
			took := time.Since(start)
			if err != nil {
				h.failed(ctx, hb, "reading the group", err)
				continue
			}
			snap, own, tr = s, false, newTracker()
			w := newWireState(hb.group, snap)
			w.ReadMs = took.Milliseconds()
			h.mu.Lock()
			if hb.firstRead == 0 {
				hb.firstRead = took
			}
			h.mu.Unlock()
			h.publish(hb, encode("state", w))
			now := time.Now().UnixMilli()
			h.record(hb, []histEntry{{At: now, Seen: now, Kind: histGap, Version: snap.Version.String(), Count: len(snap.Partitions)}})
			continue
		}
		cs, _, err := h.st.Changes(ctx, hb.group, snap.Version, store.MaxBatch)
		switch {
		case errors.Is(err, store.ErrVersionGone):
			if gone {
				h.failed(ctx, hb, "following the group's log", err)
			}
			snap, gone = nil, true
			continue
		case err != nil:
			h.failed(ctx, hb, "reading the group's log", err)
			continue
		case len(cs) == 0:
			gone = false
			continue
		}
		gone = false
		if !own {
			snap, own = snap.Clone(), true
		}
		es, err := tr.apply(snap, cs, time.Now())
		if err != nil {
			h.log.Warn("dashboard: the group's log does not follow its snapshot; reading the group again", "group", hb.group, "err", err)
			snap = nil
			continue
		}
		if setChanged(cs) {
			h.publish(hb, encode("state", newWireState(hb.group, snap)))
		} else {
			h.publish(hb, encode("delta", newDelta(snap, cs)))
			if h.replayFull(hb) {
				h.setState(hb, encode("state", newWireState(hb.group, snap)))
			}
		}
		h.record(hb, es)
	}
}

// record adds es to the group's history and sends them to its pages as
// one "history" event.
func (h *Handler) record(hb *hub, es []histEntry) {
	if len(es) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	hs := h.hist[hb.group]
	if hs == nil {
		hs = &history{since: time.UnixMilli(es[0].At)}
		h.hist[hb.group] = hs
	}
	hs.add(es)
	h.send(hb, hs.event(false, es))
}

// failed logs a store error, tells the pages its kind and waits h.retry
// (or until ctx ends).
func (h *Handler) failed(ctx context.Context, hb *hub, doing string, err error) {
	if ctx.Err() != nil {
		return
	}
	h.log.Warn("dashboard: "+doing+" failed; trying again", "group", hb.group, "retry", h.retry, "err", err)
	h.publish(hb, encode("problem", struct {
		Error string `json:"error"`
	}{errorKind(err)}))
	t := time.NewTimer(h.retry)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// encode makes an event of v (whose types always encode).
func encode(name string, v any) *event {
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte(`{"error":"encoding the event failed"}`)
		name = "problem"
	}
	return &event{name: name, data: b}
}
