package dashboard_test

import (
	"context"
	"encoding/base64"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/herdhq/herd/internal/syncbuf"

	"github.com/herdhq/herd/dashboard"
	"github.com/herdhq/herd/store"
)

// post posts body to the dashboard's action endpoint with the headers given
// (name, value pairs) and returns the status and the answer.
func post(t *testing.T, url, body string, headers ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/api/action", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// syncBuffer is a log destination tests read while the code writes.
type syncBuffer = syncbuf.Buffer

// requests reads the Requested entries of group's log after v.
func requests(t *testing.T, st store.Store, group string, v store.Version) []store.Request {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	cs, _, err := st.Changes(ctx, group, v, 100)
	if err != nil {
		t.Fatal(err)
	}
	var out []store.Request
	for _, c := range cs {
		if c.Kind == store.Requested {
			out = append(out, c.Request())
		}
	}
	return out
}

// Actions are refused unless the dashboard allows them, without the token
// when there is one, from another origin, or with a body that is not
// JSON; otherwise the request is logged in the group, where members read
// it, and the action is logged (who and what, never the token).
func TestActions(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			ctx := t.Context()
			group := uniqueGroup(t)
			if err := b.rw.Request(ctx, group, store.Request{Action: store.RequestLeave, Member: "nobody"}); err != nil {
				t.Fatal(err) // the group's log starts here
			}
			snap, err := b.rw.Snapshot(ctx, group)
			if err != nil {
				t.Fatal(err)
			}
			v := snap.Version
			const token = "tok-actions-9d2e"
			bearer := "Bearer " + token
			run := `{"group":"` + group + `","action":"run","key":"k1"}`
			json := "application/json"

			// Read-only, as by default: refused, and nothing is logged.
			ro := serve(t, dashboard.New(b.rw, dashboard.WithLogger(quiet)))
			if code, body := post(t, ro, run, "Content-Type", json); code != http.StatusForbidden || !strings.Contains(body, "--allow-actions") {
				t.Errorf("an action on a dashboard without actions: %d %s; want 403 naming --allow-actions", code, body)
			}
			if code, _, body := get(t, ro+"/api/settings", ""); code != http.StatusOK || !strings.Contains(string(body), `"actions":false`) {
				t.Errorf("settings without actions: %d %s", code, body)
			}

			var logs syncBuffer
			h := dashboard.New(b.rw, dashboard.WithActions(), dashboard.WithToken(token),
				dashboard.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
			base := serve(t, h)
			basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("ops-alice:"+token))
			for _, c := range []struct {
				why     string
				body    string
				headers []string
				want    int
			}{
				{"no token", run, []string{"Content-Type", json}, http.StatusUnauthorized},
				{"a wrong token", run, []string{"Content-Type", json, "Authorization", "Bearer nope"}, http.StatusUnauthorized},
				{"another site (Sec-Fetch-Site)", run, []string{"Content-Type", json, "Authorization", bearer, "Sec-Fetch-Site", "cross-site"}, http.StatusForbidden},
				{"another origin", run, []string{"Content-Type", json, "Authorization", bearer, "Origin", "http://evil.example"}, http.StatusForbidden},
				{"a form's body", "group=" + group + "&action=run&key=k1", []string{"Content-Type", "application/x-www-form-urlencoded", "Authorization", bearer}, http.StatusUnsupportedMediaType},
				{"an unknown action", `{"group":"` + group + `","action":"explode","key":"k1"}`, []string{"Content-Type", json, "Authorization", bearer}, http.StatusBadRequest},
				{"a run naming a member", `{"group":"` + group + `","action":"run","member":"m"}`, []string{"Content-Type", json, "Authorization", bearer}, http.StatusBadRequest},
				{"an unknown field", `{"group":"` + group + `","action":"run","key":"k1","epoch":3}`, []string{"Content-Type", json, "Authorization", bearer}, http.StatusBadRequest},
			} {
				if code, body := post(t, base, c.body, c.headers...); code != c.want {
					t.Errorf("%s: %d %s; want %d", c.why, code, body, c.want)
				}
			}
			if got := requests(t, b.rw, group, v); len(got) != 0 {
				t.Fatalf("refused actions logged requests: %+v", got)
			}

			// Accepted: the page's own requests (same origin), with the token.
			want := []store.Request{
				{Action: store.RequestRun, Partition: "k1"},
				{Action: store.RequestPause, Partition: "k2"},
				{Action: store.RequestResume, Partition: "k2"},
				{Action: store.RequestLeave, Member: "m1"},
			}
			bodies := []string{run,
				`{"group":"` + group + `","action":"pause","key":"k2"}`,
				`{"group":"` + group + `","action":"resume","key":"k2"}`,
				`{"group":"` + group + `","action":"leave","member":"m1"}`}
			host := strings.TrimPrefix(base, "http://")
			for i, body := range bodies {
				hd := []string{"Content-Type", "application/json; charset=utf-8", "Authorization", basic}
				if i%2 == 1 { // as a browser sends it from the page
					hd = append(hd, "Origin", "http://"+host, "Sec-Fetch-Site", "same-origin")
				}
				if code, answer := post(t, base, body, hd...); code != http.StatusAccepted || !strings.Contains(answer, `"requested":true`) {
					t.Errorf("action %s: %d %s; want 202", body, code, answer)
				}
			}
			got := requests(t, b.rw, group, v)
			if len(got) != len(want) {
				t.Fatalf("logged requests %+v; want %+v", got, want)
			}
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("request %d is %+v; want %+v", i, got[i], want[i])
				}
			}
			if code, _, body := get(t, base+"/api/settings", bearer); code != http.StatusOK || !strings.Contains(string(body), `"actions":true`) {
				t.Errorf("settings with actions: %d %s", code, body)
			}
			out := logs.String()
			if n := strings.Count(out, "dashboard: action requested"); n != len(want) {
				t.Errorf("%d actions logged as requested; want %d:\n%s", n, len(want), out)
			}
			for _, s := range []string{"action=pause", "key=k2", "member=m1", "user=ops-alice", "action refused: a cross-origin", "action refused: the request lacks the token"} {
				if !strings.Contains(out, s) {
					t.Errorf("the log lacks %q:\n%s", s, out)
				}
			}
			if strings.Contains(out, token) {
				t.Errorf("the log holds the token:\n%s", out)
			}
		})
	}
}
