package herd

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/memstore"
)

// renewalAcrossClose is a store whose next renewal, once armed, is
// answered only when the session is closed (then: expired) or its call is
// cancelled: a renewal in flight while the member leaves.
type renewalAcrossClose struct {
	store.Store
	armed  atomic.Bool
	once   sync.Once
	closed chan struct{}
}

func (s *renewalAcrossClose) KeepAlive(ctx context.Context, group, session string, ttl time.Duration) (time.Duration, error) {
	if s.armed.Load() {
		select {
		case <-s.closed:
			return 0, store.ErrSessionExpired
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	return s.Store.KeepAlive(ctx, group, session, ttl)
}

func (s *renewalAcrossClose) CloseSession(ctx context.Context, group, session string) error {
	err := s.Store.CloseSession(ctx, group, session)
	s.once.Do(func() { close(s.closed) })
	return err
}

// A member that leaves stops renewing its session before it closes it: a
// renewal in flight meanwhile is not answered "expired" and reported as a
// session lost (a warning that a graceful leave used to log at times).
func TestLeaveStopsRenewingFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		var mu sync.Mutex
		st := &renewalAcrossClose{Store: memstore.New(), closed: make(chan struct{})}
		m, err := Join(t.Context(), st, Config{
			Group: "g", Member: "a", Partitions: Numbered(4),
			Handler: func(c *Claim) error { <-c.Context().Done(); return nil },
			Logger:  slog.New(slog.NewTextHandler(&lockedWriter{w: &buf, mu: &mu}, nil)),
		})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		st.armed.Store(true)
		time.Sleep(DefaultSessionTTL / 3) // the next renewal is under way, and waits
		synctest.Wait()
		if err := m.Leave(t.Context()); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if strings.Contains(buf.String(), "level=WARN") {
			t.Errorf("a graceful leave logged a warning:\n%s", buf.String())
		}
		if !strings.Contains(buf.String(), "left the group") {
			t.Errorf("no line for the leave:\n%s", buf.String())
		}
	})
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
