package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/herdhq/herd/store"
)

const (
	// eventBuffer is the capacity of a Watch channel. When it is full,
	// new events are dropped: the reader still has a buffered event to
	// read, after which it re-reads the snapshot, which includes every
	// dropped change.
	eventBuffer = 64
	// defaultHealthInterval: after this long without any message the feed pings
	// the server; if the pong does not come within another interval, the
	// connection is presumed dead and the subscription is made again on
	// a new connection (followed by EventResync).
	defaultHealthInterval = 5 * time.Second
	// subscribeTimeout bounds the wait for the server's confirmation of
	// the first subscription in Watch (the caller's context may be
	// shorter).
	subscribeTimeout = 10 * time.Second
	// maxBackoff bounds the pause between attempts to reconnect the feed.
	maxBackoff = 2 * time.Second
)

// watcher is one Watch feed: its own PubSub connection, subscribed to the
// group's channel.
type watcher struct {
	s       *Store
	channel string
	out     chan store.Event
	ctx     context.Context
	cancel  context.CancelFunc

	mu     sync.Mutex
	ps     *redis.PubSub
	closed bool
}

// setPS installs ps as the current subscription, closing the previous one.
// It closes ps and reports false if the watcher has been shut down.
func (w *watcher) setPS(ps *redis.PubSub) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		if ps != nil {
			_ = ps.Close()
		}
		return false
	}
	if w.ps != nil && w.ps != ps {
		_ = w.ps.Close()
	}
	w.ps = ps
	return true
}

// shutdown closes the current subscription, which unblocks a pending
// receive; it runs when the watcher's context is done.
func (w *watcher) shutdown() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	if w.ps != nil {
		_ = w.ps.Close()
		w.ps = nil
	}
}

// subscribe opens a new PubSub subscribed to the group's channel. The
// confirmation arrives later through receive.
func (w *watcher) subscribe() (*redis.PubSub, error) {
	ps := w.s.client.Subscribe(w.ctx) // no channels yet: no I/O
	if !w.setPS(ps) {
		return nil, w.ctx.Err()
	}
	if err := ps.Subscribe(w.ctx, w.channel); err != nil {
		return nil, err
	}
	return ps, nil
}

// Watch implements store.Store. Each call has its own subscription (one
// connection). The feed starts with EventResync, and delivers EventResync
// again every time the subscription is re-established after the
// connection was lost (go-redis reconnects and resubscribes; the server's
// subscription confirmation marks the moment). Watch returns once the
// server has confirmed the subscription, so every change made after Watch
// returns is announced on the feed.
func (s *Store) Watch(ctx context.Context, group string) (<-chan store.Event, error) {
	if err := s.begin(ctx, "group", group); err != nil {
		return nil, err
	}
	wctx, cancel := context.WithCancel(ctx)
	w := &watcher{
		s:       s,
		channel: s.keys(group).events,
		out:     make(chan store.Event, eventBuffer),
		ctx:     wctx,
		cancel:  cancel,
	}
	stop := context.AfterFunc(wctx, w.shutdown)

	ps, err := w.subscribe()
	if err == nil {
		err = w.confirm(ctx, ps)
	}
	if err != nil {
		stop()
		cancel()
		w.shutdown()
		return nil, fail("Watch", err)
	}

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		stop()
		cancel()
		w.shutdown()
		return nil, fmt.Errorf("redisstore: store is closed: %w", store.ErrUnavailable)
	}
	s.watchers[w] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()

	w.out <- store.Event{Kind: store.EventResync}
	go func() {
		defer s.wg.Done()
		defer func() {
			s.mu.Lock()
			delete(s.watchers, w)
			s.mu.Unlock()
		}()
		defer close(w.out)
		defer cancel()
		w.loop(ps)
	}()
	return w.out, nil
}

// confirm waits for the server's confirmation of the first subscription.
func (w *watcher) confirm(ctx context.Context, ps *redis.PubSub) error {
	deadline := time.Now().Add(subscribeTimeout)
	for {
		left := time.Until(deadline)
		if d, ok := ctx.Deadline(); ok && time.Until(d) < left {
			left = time.Until(d)
		}
		if left <= 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
			return errors.New("no subscription confirmation from the server")
		}
		msg, err := ps.ReceiveTimeout(w.ctx, left)
		if err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return cerr
			}
			return err
		}
		if sub, ok := msg.(*redis.Subscription); ok && sub.Kind == "subscribe" {
			return nil
		}
	}
}

// loop receives until the watcher's context is done.
func (w *watcher) loop(ps *redis.PubSub) {
	pinged := false
	backoff := 50 * time.Millisecond
	for w.ctx.Err() == nil {
		if ps == nil {
			var err error
			ps, err = w.subscribe()
			if err != nil {
				ps = nil
				w.sleep(&backoff)
				continue
			}
			pinged = false
		}
		msg, err := ps.ReceiveTimeout(w.ctx, w.s.health)
		if w.ctx.Err() != nil {
			return
		}
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				if pinged {
					// No pong for a whole interval: drop the connection
					// and subscribe anew.
					ps = nil
					continue
				}
				if err := ps.Ping(w.ctx); err != nil {
					ps = nil
					continue
				}
				pinged = true
				continue
			}
			// The connection broke; go-redis reconnects and resubscribes
			// on the next receive. Pause so a dead server is not hammered.
			w.sleep(&backoff)
			continue
		}
		pinged = false
		backoff = 50 * time.Millisecond
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				w.send(store.Event{Kind: store.EventResync})
			}
		case *redis.Message:
			w.send(parseEvent(m.Payload))
		}
	}
}

func (w *watcher) sleep(backoff *time.Duration) {
	t := time.NewTimer(*backoff)
	defer t.Stop()
	select {
	case <-t.C:
	case <-w.ctx.Done():
	}
	*backoff = min(2**backoff, maxBackoff)
}

// send delivers ev without blocking; see eventBuffer for why dropping is
// safe.
func (w *watcher) send(ev store.Event) {
	select {
	case w.out <- ev:
	default:
	}
}

// parseEvent decodes "<kind>\n<session>\n<partition>". Anything it does not
// understand becomes EventResync, so the reader re-reads.
func parseEvent(payload string) store.Event {
	kind, rest, ok := strings.Cut(payload, "\n")
	if !ok || len(kind) != 1 {
		return store.Event{Kind: store.EventResync}
	}
	session, partition, ok := strings.Cut(rest, "\n")
	if !ok {
		return store.Event{Kind: store.EventResync}
	}
	ev := store.Event{Session: session, Partition: partition}
	switch kind {
	case "J":
		ev.Kind = store.EventJoined
	case "L":
		ev.Kind = store.EventLeft
	case "C":
		ev.Kind = store.EventClaimed
	case "R":
		ev.Kind = store.EventReleased
	case "P":
		ev.Kind = store.EventPartitions
	default:
		return store.Event{Kind: store.EventResync}
	}
	return ev
}
