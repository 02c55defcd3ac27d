package sqlitestore

import (
	"context"
	"errors"
	"time"

	"github.com/herdhq/herd/store"
)

// watchBuffer is the capacity of a Watch channel. When the reader lets it
// fill up, further events are dropped until it catches up: the reader
// still has buffered events to read, after which it re-reads the
// snapshot, which shows every dropped change.
const watchBuffer = 64

// Watch implements store.Store, thinly over Changes: a goroutine follows
// the group's log from its version when Watch is called and sends one
// event per entry. When the version cannot be continued (the log was
// trimmed past it, or the group deleted) or a read fails, it sends
// EventResync and goes on from the log's version then, with EventLeft and
// EventJoined for the sessions that ended or began in between (it keeps
// the set of live session ids for that). The channel is closed when ctx
// ends or the store is closed.
func (s *Store) Watch(ctx context.Context, group string) (<-chan store.Event, error) {
	if err := s.begin(ctx, "watch", "group", group); err != nil {
		return nil, err
	}
	v, live, err := s.sessionsAt(ctx, group)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, s.live(ctx, "watch")
	}
	s.watchers.Add(1)
	s.mu.Unlock()
	ch := make(chan store.Event, watchBuffer)
	go func() {
		defer s.watchers.Done()
		defer close(ch)
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() {
			select {
			case <-s.done:
				cancel()
			case <-ctx.Done():
			}
		}()
		s.follow(ctx, group, v, live, ch)
	}()
	return ch, nil
}

// sessionsAt reads the group's log version and live session ids.
func (s *Store) sessionsAt(ctx context.Context, group string) (store.Version, map[string]bool, error) {
	var v store.Version
	live := map[string]bool{}
	err := s.read(ctx, "watch", func(c conn) error {
		g, err := loadGroup(c, group)
		if err != nil || g == nil {
			return err
		}
		if g.seq > 0 {
			v = store.Version{Seq: g.seq, Tag: g.tag}
		}
		rows, err := c.rows(qSessionIDs, g.id)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			live[id] = true
		}
		return rows.Err()
	})
	return v, live, err
}

func (s *Store) follow(ctx context.Context, group string, v store.Version, live map[string]bool, ch chan<- store.Event) {
	send := func(ev store.Event) {
		select {
		case ch <- ev:
		default:
		}
	}
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		cs, next, err := s.changes(ctx, group, v, 256, true)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			if !errors.Is(err, store.ErrVersionGone) {
				select {
				case <-time.After(backoff):
				case <-ctx.Done():
					return
				}
				backoff = min(2*backoff, 2*time.Second)
			}
			nv, now, err := s.sessionsAt(ctx, group)
			if err != nil {
				continue
			}
			send(store.Event{Kind: store.EventResync})
			for id := range live {
				if !now[id] {
					send(store.Event{Kind: store.EventLeft, Session: id})
				}
			}
			for id := range now {
				if !live[id] {
					send(store.Event{Kind: store.EventJoined, Session: id})
				}
			}
			v, live = nv, now
			continue
		}
		backoff = 50 * time.Millisecond
		for _, c := range cs {
			switch c.Kind {
			case store.SessionOpened:
				live[c.Session] = true
			case store.SessionClosed, store.SessionExpired:
				delete(live, c.Session)
			}
			send(event(c))
		}
		v = next
	}
}

// event is the Watch event of a log entry.
func event(c store.Change) store.Event {
	ev := store.Event{Session: c.Session, Partition: c.Partition}
	switch c.Kind {
	case store.SessionOpened:
		ev.Kind = store.EventJoined
	case store.SessionClosed, store.SessionExpired:
		ev.Kind = store.EventLeft
	case store.Claimed:
		ev.Kind = store.EventClaimed
	case store.Released, store.Restored:
		ev.Kind = store.EventReleased
	case store.PartitionsSet:
		ev.Kind = store.EventPartitions
	default:
		ev.Kind = store.EventResync
	}
	return ev
}
