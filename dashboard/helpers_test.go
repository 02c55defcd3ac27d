package dashboard_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/herdtest"
	"github.com/herdhq/herd/internal/redistest"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/redisstore"
	"github.com/herdhq/herd/store/sqlitestore"
)

var quiet = slog.New(slog.DiscardHandler)

// backend is a real store: members write through rw, the dashboard reads
// through ro (read-only where the backend has such a mode).
type backend struct {
	name   string
	rw, ro store.Store
}

// backends opens an SQLite file in t.TempDir() and Redis under a prefix
// of its own (deleted when t ends).
func backends(t *testing.T) []backend {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "herd.db")
	rw, err := sqlitestore.Open(ctx, "sqlite://"+path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rw.Close() })
	ro, err := sqlitestore.Open(ctx, "sqlite://"+path, sqlitestore.WithReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ro.Close() })
	bs := []backend{{"sqlite", rw, ro}}
	raw := redistest.Need(t)
	prefix := redistest.Prefix(t, raw, "dashboard")
	rs, err := redisstore.Open(ctx, redistest.URL(), redisstore.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
	return append(bs, backend{"redis", rs, rs})
}

// member is a member joined in this process, with a gate that freezes it
// as if its process were stopped (its session then expires: a crash).
type member struct {
	*herd.Member
	gate *herdtest.Gate
}

// join joins a member of group running every partition it owns until it
// loses it; it leaves when t ends.
func join(t *testing.T, st store.Store, group, id string, ps []store.Partition, ttl time.Duration) *member {
	t.Helper()
	return joinHandler(t, st, group, id, ps, ttl, func(c *herd.Claim) error {
		<-c.Context().Done()
		return nil
	})
}

// joinHandler is join with the member's handler.
func joinHandler(t *testing.T, st store.Store, group, id string, ps []store.Partition, ttl time.Duration, h herd.Handler) *member {
	t.Helper()
	g := &herdtest.Gate{}
	cfg := herd.Config{Group: group, Member: id, Partitions: ps, SessionTTL: ttl, Logger: quiet,
		JoinSettle: -1, Handler: h}
	herdtest.WithGate(&cfg, g)
	m, err := herd.Join(context.Background(), st, cfg)
	if err != nil {
		t.Fatalf("joining %s: %v", id, err)
	}
	t.Cleanup(func() {
		g.Resume()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = m.Leave(ctx)
	})
	return &member{m, g}
}

// groupJSON is the part of /api/group the tests read.
type groupJSON struct {
	Group   string `json:"group"`
	Members []struct {
		Session string `json:"session"`
		Member  string `json:"member"`
		Weight  int    `json:"weight"`
		Owned   int    `json:"owned"`
	} `json:"members"`
	Sessions   []string `json:"sessions"`
	Partitions []string `json:"partitions"`
	Owner      []int    `json:"owner"`
	Epoch      []uint64 `json:"epoch"`
	Unowned    int      `json:"unowned"`
	NobodyRuns []struct {
		ID, Reason string
	} `json:"nobodyRuns"`
}

// get fetches url with the Authorization header auth ("" for none) and
// returns the status and body.
func get(t *testing.T, url, auth string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

// waitGroup polls /api/group until ok accepts it, failing after d.
func waitGroup(t *testing.T, base, group string, d time.Duration, ok func(g groupJSON) bool) groupJSON {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		code, _, b := get(t, base+"/api/group?group="+group, "")
		var g groupJSON
		if code == http.StatusOK {
			if err := json.Unmarshal(b, &g); err != nil {
				t.Fatalf("/api/group: %v in %s", err, b)
			}
			if ok(g) {
				return g
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/api/group did not reach the expected state in %v; last answer %d: %.2000s", d, code, b)
		}
		time.Sleep(20 * time.Millisecond) // polling the condition, not hoping
	}
}

// sseEvent is one server-sent event.
type sseEvent struct{ name, data string }

// openEvents opens the event stream of group and returns its events, in
// order, on a channel closed when the stream ends (at t's end at last).
func openEvents(t *testing.T, base, group string) <-chan sseEvent {
	t.Helper()
	ch, _ := openEventsStop(t, base, group)
	return ch
}

// openEventsStop is openEvents with a function that closes the stream
// and waits until the channel is closed.
func openEventsStop(t *testing.T, base, group string) (<-chan sseEvent, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/events?group="+group, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		cancel()
		t.Fatalf("events: status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	ch := make(chan sseEvent, 1024)
	done := make(chan struct{})
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)
	go func() {
		defer close(done)
		defer close(ch)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 64<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.name != "" {
					ch <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "event: "):
				ev.name = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				ev.data = line[len("data: "):]
			}
		}
	}()
	return ch, stop
}

// next returns the next event, failing if none comes within d.
func next(t *testing.T, ch <-chan sseEvent, d time.Duration) sseEvent {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("the event stream ended")
		}
		return ev
	case <-time.After(d):
		t.Fatalf("no event within %v", d)
	}
	panic("unreachable")
}

// decodeState decodes a "state" event (its columns packed) as the
// groupJSON /api/group answers.
func decodeState(t *testing.T, data string) groupJSON {
	t.Helper()
	var w struct {
		groupJSON
		Partitions string `json:"partitions"`
		Slot       string `json:"slot"`
		SlotBytes  int    `json:"slotBytes"`
		SlotOwner  string `json:"slotOwner"`
		SlotEpoch  string `json:"slotEpoch"`
		N          int    `json:"n"`
	}
	mustJSON(t, data, &w)
	g := w.groupJSON
	slot, err1 := base64.StdEncoding.DecodeString(w.Slot)
	owner, err2 := base64.StdEncoding.DecodeString(w.SlotOwner)
	epoch, err3 := base64.StdEncoding.DecodeString(w.SlotEpoch)
	if err1 != nil || err2 != nil || err3 != nil || (w.SlotBytes != 0 && w.SlotBytes != 2) || len(slot) != w.SlotBytes*w.N || 2*len(owner) != len(epoch) ||
		w.SlotBytes == 0 && len(owner) != 4*w.N {
		t.Fatalf("state columns: %v %v %v, %d bytes of %d-byte slots for %d partitions, %d and %d bytes of slots", err1, err2, err3, len(slot), w.SlotBytes, w.N, len(owner), len(epoch))
	}
	if w.N > 0 {
		g.Partitions = strings.Split(w.Partitions, "\n")
	}
	if len(g.Partitions) != w.N {
		t.Fatalf("state: %d partition ids for n = %d", len(g.Partitions), w.N)
	}
	g.Owner, g.Epoch = make([]int, w.N), make([]uint64, w.N)
	for i := range w.N {
		j := i // SlotBytes 0: a pair per partition
		if w.SlotBytes == 2 {
			j = int(binary.LittleEndian.Uint16(slot[2*i:]))
		}
		if 4*j >= len(owner) {
			t.Fatalf("state: partition %d in slot %d of %d", i, j, len(owner)/4)
		}
		g.Owner[i] = int(int32(binary.LittleEndian.Uint32(owner[4*j:])))
		g.Epoch[i] = uint64(math.Float64frombits(binary.LittleEndian.Uint64(epoch[8*j:])))
	}
	return g
}

func mustJSON(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("%v in %.500s", err, s)
	}
}

func uniqueGroup(t *testing.T) string {
	return fmt.Sprintf("dash-%s", redistest.RandomHex(4))
}
