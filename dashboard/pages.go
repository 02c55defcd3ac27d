package dashboard

import (
	"context"
	"time"
)

// A group's hub starts with the first page that shows it, or with the
// request of a page's HTML that names it (?group=NAME): then the group's
// read overlaps the browser's loading of the page's scripts, and the
// first page of a large group (100,000 records, read in hundreds of
// milliseconds on a loaded machine) gets its map sooner. It stops
// Handler.linger after its last page closes (or after the HTML request,
// if no page opens): a page reloaded, or opened again on a group shown
// a moment ago, is sent the state the follower keeps, without a read of
// the group. While it has no page the follower keeps following the log
// (one waiting call to the store) and the refresher does not read.

// defaultLinger is how long a group is followed after its last page
// closes.
const defaultLinger = time.Minute

// WithLinger sets how long a group is still followed after its last page
// closes, or after a request of the page that names it (?group=NAME) if
// no page opens; default 1 minute. 0 stops the follower with the last
// page, and then a page's request does not start it.
func WithLinger(d time.Duration) Option {
	return func(h *Handler) {
		if d >= 0 {
			h.linger = d
		}
	}
}

// hubLocked returns group's hub, starting it if it has none. The caller
// holds h.mu, and h is not closed.
func (h *Handler) hubLocked(group string) *hub {
	hb := h.hubs[group]
	if hb == nil {
		ctx, cancel := context.WithCancel(h.ctx)
		hb = &hub{group: group, subs: map[*sub]bool{}, stop: cancel, ready: make(chan struct{}), paged: make(chan struct{}, 1)}
		h.hubs[group] = hb
		h.wg.Add(2)
		go h.follow(ctx, hb)
		go h.refresh(ctx, hb)
	}
	return hb
}

// prefetch starts following group, if it is not followed, for a page
// about to open: the hub waits h.linger for it.
func (h *Handler) prefetch(group string) {
	if h.linger <= 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ctx.Err() != nil {
		return
	}
	if hb := h.hubLocked(group); len(hb.subs) == 0 {
		h.idleLocked(hb)
	}
}

// subscribe opens an event stream of group, starting its follower if it
// has none, and queues what the page needs first. It returns nil after
// Close.
func (h *Handler) subscribe(group string) (*hub, *sub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ctx.Err() != nil {
		return nil, nil
	}
	hb := h.hubLocked(group)
	s := &sub{ch: make(chan *event, subBuffer)}
	fresh := true
	if len(hb.subs) == 0 {
		// The hub had no page: keep it, and wake its refresher. The last
		// refresh is sent only if the refresher read it while pages
		// were open, or has not passed its next read since.
		hb.idleGen++
		if hb.idle != nil {
			hb.idle.Stop()
			hb.idle = nil
		}
		select {
		case hb.paged <- struct{}{}:
		default:
		}
		fresh = time.Now().Before(hb.refreshDue)
	}
	hb.subs[s] = true
	if hb.state != nil {
		s.ch <- hb.state
		for _, d := range hb.deltas {
			s.ch <- d
		}
	}
	if hs := h.hist[group]; hs != nil {
		s.ch <- hs.event(true, hs.entries)
	}
	if hb.refresh != nil && fresh {
		s.ch <- hb.refresh
	}
	return hb, s
}

// unsubscribe ends s; the last page of a group leaves the hub to stop
// after h.linger.
func (h *Handler) unsubscribe(hb *hub, s *sub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(hb.subs, s)
	if len(hb.subs) == 0 && h.hubs[hb.group] == hb {
		h.idleLocked(hb)
	}
}

// idleLocked stops hb after h.linger (now if 0) unless a page opens on it
// meanwhile; a timer set before is replaced. The caller holds h.mu.
func (h *Handler) idleLocked(hb *hub) {
	hb.idleGen++
	if hb.idle != nil {
		hb.idle.Stop()
		hb.idle = nil
	}
	if h.linger <= 0 {
		h.stopLocked(hb)
		return
	}
	gen := hb.idleGen
	hb.idle = time.AfterFunc(h.linger, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if hb.idleGen == gen && len(hb.subs) == 0 && h.hubs[hb.group] == hb {
			h.stopLocked(hb)
		}
	})
}

// stopLocked stops hb's follower and refresher. The caller holds h.mu.
func (h *Handler) stopLocked(hb *hub) {
	hb.stop()
	delete(h.hubs, hb.group)
}

// awaitPage returns at once if hb has a page; otherwise it waits for one
// to open, then waits delay (the page's first state goes first). It
// reports whether ctx is still live.
func (h *Handler) awaitPage(ctx context.Context, hb *hub, delay time.Duration) bool {
	waited := false
	for {
		h.mu.Lock()
		paged := len(hb.subs) > 0
		h.mu.Unlock()
		if paged {
			return !waited || sleep(ctx, delay)
		}
		select {
		case <-ctx.Done():
			return false
		case <-hb.paged:
			waited = true
		}
	}
}
