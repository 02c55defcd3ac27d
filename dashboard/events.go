package dashboard

import (
	"fmt"
	"net/http"
	"time"

	"github.com/herdhq/herd/store"
)

// keepAlive is how often an idle event stream gets a comment, so that
// proxies and the browser keep it open.
const keepAlive = 15 * time.Second

// serveEvents streams a group's events (text/event-stream): "state" (the
// whole group, a groupState), then a "delta" (groupDelta) per batch of
// log entries, a new "state" when the partition set changes, and
// "problem" ({"error": ...}) while the store fails.
func (h *Handler) serveEvents(w http.ResponseWriter, r *http.Request) {
	group := r.URL.Query().Get("group")
	if err := store.ValidateID("group", group); err != nil {
		writeError(w, http.StatusBadRequest, "?group= must name a group (a valid id)")
		return
	}
	hb, s := h.subscribe(group)
	if s == nil {
		writeError(w, http.StatusServiceUnavailable, "the dashboard is shutting down")
		return
	}
	defer h.unsubscribe(hb, s)
	rc := http.NewResponseController(w)
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if _, err := fmt.Fprint(w, "retry: 2000\n\n"); err != nil || rc.Flush() != nil {
		return
	}
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		var err error
		select {
		case <-r.Context().Done():
			return
		case <-h.ctx.Done():
			return
		case ev, ok := <-s.ch:
			if !ok {
				return // dropped: too far behind
			}
			_, err = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev.name, ev.data)
		case <-tick.C:
			_, err = fmt.Fprint(w, ": keep-alive\n\n")
		}
		if err != nil || rc.Flush() != nil {
			return
		}
	}
}
