// Package dashboard is herd's live web dashboard as an http.Handler: the
// groups of a store, and per group its members, a map of its partitions
// coloured by owner and the partitions nobody runs, updated live from the
// group's log through server-sent events.
//
// Mount it in a server of your own (herd dashboard does the same):
//
//	h := dashboard.New(st, dashboard.WithToken(os.Getenv("HERD_DASHBOARD_TOKEN")))
//	defer h.Close()
//	mux.Handle("/herd/", http.StripPrefix("/herd", h))
//
// The dashboard only reads: it calls Snapshot, Changes, Records and Groups
// (store.GroupLister), never a method that writes, unless it is made
// WithActions: then the page may log requests to a group's members
// (store.Store.Request; see actions.go), which the members act on under
// their own epochs. One follower per group
// reads the group's log, whatever the number of open pages; it starts with
// the first page that shows the group (or the request of that page,
// ?group=NAME) and stops a minute after the last (WithLinger). The page
// and its assets are embedded: nothing is fetched from elsewhere, and the
// Content-Security-Policy allows nothing else.
package dashboard

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herdhq/herd/store"
)

//go:embed assets
var assets embed.FS

// csp lets the page load its own script and style and connect to its own
// server only: no inline script, no other origin, no framing.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; " +
	"img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Option configures a Handler.
type Option func(*Handler)

// WithToken makes every request need the token: as a bearer token
// (Authorization: Bearer TOKEN) or as the password of basic auth (any user
// name), which is how a browser sends it after its login prompt. An empty
// token leaves the dashboard open, as without the option.
func WithToken(token string) Option {
	return func(h *Handler) {
		if token != "" {
			sum := sha256.Sum256([]byte(token))
			h.token = sum[:]
		}
	}
}

// WithLogger sets where the dashboard logs the store's errors (the page
// shows only their kind); default slog.Default().
func WithLogger(l *slog.Logger) Option {
	return func(h *Handler) {
		if l != nil {
			h.log = l
		}
	}
}

// WithRetry sets how long a follower waits before it reads the store
// again after an error; default 1s.
func WithRetry(d time.Duration) Option {
	return func(h *Handler) {
		if d > 0 {
			h.retry = d
		}
	}
}

// Handler serves the dashboard. Make it with New; Close stops its
// followers.
type Handler struct {
	st    store.Store
	token []byte // sha256 of the token; nil: no token needed
	log   *slog.Logger
	retry time.Duration
	mux   *http.ServeMux
	// refreshEvery is how often a shown group is read again (WithRefresh).
	refreshEvery time.Duration
	// linger is how long a group is followed without a page (WithLinger).
	linger time.Duration

	// actions: the page may send requests (WithActions); origin refuses
	// the browsers' cross-origin ones.
	actions bool
	origin  *http.CrossOriginProtection

	ctx    context.Context // ends at Close: every follower's parent
	cancel context.CancelFunc
	mu     sync.Mutex
	hubs   map[string]*hub // the groups with open pages
	// hist is each group's ownership history since the dashboard first
	// followed it; it outlives the group's followers.
	hist map[string]*history
	// refreshers counts the refreshers running (for tests).
	refreshers atomic.Int32
	wg         sync.WaitGroup // followers running
}

// New returns the dashboard of st. The caller keeps st: Close does not
// close it.
func New(st store.Store, opts ...Option) *Handler {
	h := &Handler{st: st, log: slog.Default(), retry: time.Second, refreshEvery: defaultRefresh, linger: defaultLinger,
		hubs: map[string]*hub{}, hist: map[string]*history{}, origin: http.NewCrossOriginProtection()}
	for _, o := range opts {
		o(h)
	}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	static, _ := fs.Sub(assets, "assets") // a constant path in the embedded tree
	files := http.FileServerFS(static)
	h.mux = http.NewServeMux()
	h.mux.Handle("GET /{$}", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The page of a group (?group=NAME): its read starts now, while
		// the browser loads the scripts that will open its events.
		if g := r.URL.Query().Get("group"); g != "" && store.ValidateID("group", g) == nil {
			h.prefetch(g)
		}
		files.ServeHTTP(w, r)
	}))
	for _, f := range []string{"app.js", "map.js", "views.js", "jobs.js", "actions.js", "app.css"} {
		h.mux.Handle("GET /"+f, files)
	}
	h.mux.HandleFunc("GET /api/groups", h.serveGroups)
	h.mux.HandleFunc("GET /api/group", h.serveGroup)
	h.mux.HandleFunc("GET /api/events", h.serveEvents)
	h.mux.HandleFunc("GET /api/settings", h.serveSettings)
	h.mux.HandleFunc("POST /api/action", h.serveAction)
	return h
}

// Close stops every follower and ends every open event stream.
func (h *Handler) Close() error {
	h.cancel()
	h.mu.Lock()
	for _, hb := range h.hubs {
		if hb.idle != nil {
			hb.idle.Stop()
		}
	}
	h.mu.Unlock()
	h.wg.Wait()
	return nil
}

// ServeHTTP checks the token, sets the security headers and serves the
// page, its assets and its API.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", csp)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Frame-Options", "DENY")
	if !h.authorized(r) {
		if r.URL.Path == "/api/action" {
			h.log.Warn("dashboard: action refused: the request lacks the token", "remote", r.RemoteAddr)
		}
		hd.Add("WWW-Authenticate", `Basic realm="herd dashboard", charset="UTF-8"`)
		hd.Add("WWW-Authenticate", `Bearer realm="herd dashboard"`)
		http.Error(w, "401 unauthorized: this dashboard needs its token (Authorization: Bearer TOKEN, or as the password of basic auth)", http.StatusUnauthorized)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead && (r.Method != http.MethodPost || r.URL.Path != "/api/action") {
		http.Error(w, "405 method not allowed: the dashboard only reads, but for its actions (POST /api/action)", http.StatusMethodNotAllowed)
		return
	}
	h.mux.ServeHTTP(w, r)
}

// authorized reports whether r carries the token (always, without one),
// comparing digests in constant time.
func (h *Handler) authorized(r *http.Request) bool {
	if h.token == nil {
		return true
	}
	auth := r.Header.Get("Authorization")
	var given string
	if scheme, rest, ok := strings.Cut(auth, " "); ok && strings.EqualFold(scheme, "Bearer") {
		given = strings.TrimSpace(rest)
	} else if ok && strings.EqualFold(scheme, "Basic") {
		b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(rest))
		if err != nil {
			return false
		}
		_, given, _ = strings.Cut(string(b), ":")
	} else {
		return false
	}
	sum := sha256.Sum256([]byte(given))
	return subtle.ConstantTimeCompare(sum[:], h.token) == 1
}

// serveGroups answers {"groups": [...]}: the store's groups, sorted.
func (h *Handler) serveGroups(w http.ResponseWriter, r *http.Request) {
	gl, ok := h.st.(store.GroupLister)
	if !ok {
		writeError(w, http.StatusNotImplemented, "this store cannot list its groups: open a group by name (?group=NAME)")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	gs, err := gl.Groups(ctx)
	if err != nil {
		h.log.Warn("dashboard: listing the groups", "err", err)
		writeError(w, http.StatusBadGateway, errorKind(err))
		return
	}
	if gs == nil {
		gs = []string{}
	}
	writeJSON(w, struct {
		Groups []string `json:"groups"`
	}{gs})
}

// serveGroup answers the group's state (see groupState), read from the
// store now: for scripts and tests; the page follows the events instead.
func (h *Handler) serveGroup(w http.ResponseWriter, r *http.Request) {
	group := r.URL.Query().Get("group")
	if err := store.ValidateID("group", group); err != nil {
		writeError(w, http.StatusBadRequest, "?group= must name a group (a valid id)")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	snap, err := h.st.Snapshot(ctx, group)
	if err != nil {
		h.log.Warn("dashboard: reading the group", "group", group, "err", err)
		writeError(w, http.StatusBadGateway, errorKind(err))
		return
	}
	writeJSON(w, newGroupState(group, snap))
}

// errorKind is what a page is told of a store error: its kind, never its
// text, which may name a host or a user (the log has the whole error).
func errorKind(err error) string {
	switch {
	case errors.Is(err, store.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		return "the store is unavailable (the dashboard's log has the error)"
	case errors.Is(err, store.ErrCorrupt):
		return "the store holds a record the dashboard cannot read (the dashboard's log has the error)"
	case errors.Is(err, store.ErrInvalid):
		return "invalid group id"
	}
	return "reading the store failed (the dashboard's log has the error)"
}

func writeJSON(w http.ResponseWriter, v any) { writeJSONCode(w, http.StatusOK, v) }

func writeJSONCode(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "encoding the answer failed")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	b, _ := json.Marshal(struct {
		Error string `json:"error"`
	}{msg})
	_, _ = w.Write(b)
}
