package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/herdhq/herd/store"
)

// watchBuffer is the capacity of a Watch channel. When the reader lets it
// fill up, new events are dropped: the reader still has a buffered event
// to read, after which it re-reads the snapshot, which shows every dropped
// change.
const watchBuffer = 64

// watcher is one Watch feed: a goroutine reading the group's log.
type watcher struct {
	s        *Store
	group    string
	out      chan store.Event
	cancel   context.CancelFunc
	version  store.Version
	sessions map[string]bool // the group's sessions as of version
}

// Watch implements store.Store over Changes: one goroutine per feed reads
// the group's log from the version at the call and sends one event per
// entry. When its version is gone (the log was trimmed past it, or the
// group deleted), it reads the group's version and sessions again and
// sends EventLeft and EventJoined for the sessions that ended or began
// meanwhile, then EventResync. The feed starts with EventResync; every
// change committed after Watch returns is announced.
func (s *Store) Watch(ctx context.Context, group string) (<-chan store.Event, error) {
	if err := s.begin(ctx, "Watch", "group", group); err != nil {
		return nil, err
	}
	wctx, cancel := context.WithCancel(ctx)
	w := &watcher{s: s, group: group, out: make(chan store.Event, watchBuffer), cancel: cancel}
	if err := w.resync(wctx, nil); err != nil {
		cancel()
		return nil, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		cancel()
		return nil, fmt.Errorf("pgstore: Watch: store is closed: %w", store.ErrUnavailable)
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
		w.loop(wctx)
	}()
	return w.out, nil
}

// resync reads the group's version and sessions. With send (the version
// was gone), it announces the sessions that ended since; then, if the
// group's log is a history whose first entry is still kept (the group was
// deleted, or had no log), the feed replays it from its start, and
// otherwise (the log was trimmed past the feed) it announces the sessions
// that began and goes on from the log's end.
func (w *watcher) resync(ctx context.Context, send func(store.Event)) error {
	var seq, tag, start int64
	var ids []string
	err := w.s.queryRow(ctx, "Watch", w.s.q.watchState, []any{w.group}, &seq, &tag, &start, &ids)
	if err != nil && !isNoRows(err) {
		return err
	}
	now := make(map[string]bool, len(ids))
	for _, id := range ids {
		now[id] = true
	}
	replay := seq == 0 || start == 1 && send != nil
	if send != nil {
		for id := range w.sessions {
			if replay || !now[id] {
				send(store.Event{Kind: store.EventLeft, Session: id})
			}
		}
		if !replay {
			for id := range now {
				if !w.sessions[id] {
					send(store.Event{Kind: store.EventJoined, Session: id})
				}
			}
		}
		send(store.Event{Kind: store.EventResync})
	}
	if replay {
		w.version, w.sessions = store.Version{}, map[string]bool{}
		return nil
	}
	w.version = store.Version{Seq: uint64(seq), Tag: uint64(tag)}
	w.sessions = now
	return nil
}

func (w *watcher) loop(ctx context.Context) {
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		cs, next, err := w.s.changes(ctx, w.group, w.version, 1000, true)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, store.ErrVersionGone) {
			err = w.resync(ctx, w.send)
		}
		if err != nil {
			// The store is unreachable: try again after a pause, and tell
			// the reader it may have missed something.
			w.send(store.Event{Kind: store.EventResync})
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return
			}
			backoff = min(2*backoff, 2*time.Second)
			continue
		}
		backoff = 50 * time.Millisecond
		for _, c := range cs {
			w.send(eventOf(c))
			switch c.Kind {
			case store.SessionOpened:
				w.sessions[c.Session] = true
			case store.SessionClosed, store.SessionExpired:
				delete(w.sessions, c.Session)
			}
		}
		if len(cs) > 0 {
			w.version = next
		}
	}
}

// send delivers ev without blocking (see watchBuffer).
func (w *watcher) send(ev store.Event) {
	select {
	case w.out <- ev:
	default:
	}
}

func eventOf(c store.Change) store.Event {
	switch c.Kind {
	case store.SessionOpened:
		return store.Event{Kind: store.EventJoined, Session: c.Session}
	case store.SessionClosed, store.SessionExpired:
		return store.Event{Kind: store.EventLeft, Session: c.Session}
	case store.Claimed:
		return store.Event{Kind: store.EventClaimed, Session: c.Session, Partition: c.Partition}
	case store.Released:
		return store.Event{Kind: store.EventReleased, Session: c.Session, Partition: c.Partition}
	case store.Restored:
		return store.Event{Kind: store.EventReleased, Partition: c.Partition}
	case store.PartitionsSet:
		return store.Event{Kind: store.EventPartitions}
	}
	return store.Event{Kind: store.EventResync}
}
