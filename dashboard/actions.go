package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"time"

	"github.com/herdhq/herd/store"
)

// Actions: the page may ask the owner of a key to run it now, to pause or
// resume it, and a member to leave gracefully, when the dashboard is made
// WithActions (herd dashboard --allow-actions). The dashboard never writes
// a record: it logs a request in the group (store.Store.Request), which the
// key's owner, or the member named, reads from the log it follows and acts
// on under its own epoch. A request for a key nobody owns, or for a member
// that is not running, is dropped by the members; the answer says only
// that the request was logged.
//
// The endpoint is POST /api/action with a JSON body; it is refused unless
// actions are on, unless the request carries the token when there is one
// (as every request), and unless it comes from the dashboard's own page:
// a browser's cross-origin request is refused (http.CrossOriginProtection:
// Sec-Fetch-Site, or Origin against Host), and the body must be JSON, which
// a form on another site cannot send without the server's consent. Every
// action, done or refused, is logged with who asked (address, and the
// basic auth user name if any; never the token).

// WithActions lets the page send requests to a group's members (run a key
// now, pause or resume it, ask a member to leave). Without it the dashboard
// only reads, and the page shows no action.
func WithActions() Option {
	return func(h *Handler) { h.actions = true }
}

// actionBody is what the page posts.
type actionBody struct {
	Group  string `json:"group"`
	Action string `json:"action"` // store.RequestRun, RequestPause, RequestResume, RequestLeave
	Key    string `json:"key,omitempty"`
	Member string `json:"member,omitempty"`
}

// maxActionBody bounds the body read: ids are at most 512 bytes each.
const maxActionBody = 4 << 10

// serveSettings answers what the page may offer: {"actions": bool}.
func (h *Handler) serveSettings(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, struct {
		Actions bool `json:"actions"`
	}{h.actions})
}

// serveAction logs a request in the group for its members to act on.
func (h *Handler) serveAction(w http.ResponseWriter, r *http.Request) {
	who := []any{"remote", r.RemoteAddr}
	if user, _, ok := r.BasicAuth(); ok && user != "" {
		who = append(who, "user", user)
	}
	refuse := func(code int, why string, args ...any) {
		h.log.Warn("dashboard: action refused: "+why, append(who, args...)...)
		writeError(w, code, why)
	}
	if !h.actions {
		refuse(http.StatusForbidden, "actions are off: the dashboard only reads (start herd dashboard with --allow-actions)")
		return
	}
	if err := h.origin.Check(r); err != nil {
		refuse(http.StatusForbidden, "a cross-origin request: actions come from the dashboard's own page")
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		refuse(http.StatusUnsupportedMediaType, "an action's body is JSON (Content-Type: application/json)")
		return
	}
	var b actionBody
	dec := json.NewDecoder(io.LimitReader(r.Body, maxActionBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		refuse(http.StatusBadRequest, "the body is not an action: {\"group\", \"action\", \"key\" or \"member\"}")
		return
	}
	req := store.Request{Action: b.Action, Partition: b.Key, Member: b.Member}
	what := []any{"group", b.Group, "action", b.Action, "key", b.Key, "member", b.Member}
	if err := store.ValidateRequest(b.Group, req); err != nil {
		refuse(http.StatusBadRequest, "invalid action: "+err.Error(), what...)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	if err := h.st.Request(ctx, b.Group, req); err != nil {
		h.log.Warn("dashboard: action failed: the request could not be logged", append(append(who, what...), "err", err)...)
		code, msg := http.StatusBadGateway, "the request could not be logged in the store (opened read-only?): the dashboard's log has the error"
		switch {
		case errors.Is(err, store.ErrInvalid):
			code, msg = http.StatusBadRequest, "invalid request"
		case errors.Is(err, store.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
			msg = errorKind(err)
		}
		writeError(w, code, msg)
		return
	}
	h.log.Info("dashboard: action requested", append(who, what...)...)
	writeJSONCode(w, http.StatusAccepted, struct {
		Requested bool   `json:"requested"`
		Note      string `json:"note"`
	}{true, "logged in the group: the key's owner, or the member, acts on it when it reads the group's log; nobody does if nobody owns the key or the member is not running"})
}
