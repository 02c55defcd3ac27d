package sqlitestore

import (
	"context"
	"database/sql"
	"sync"
	"time"
)

// notifier wakes the readers waiting at the end of a log (Changes, and so
// Watch) when another connection, of this process or another, commits to
// the file. Writes of this Store wake them at once (wake after commit).
// Other processes' commits are seen by:
//
//   - inotify (Linux) on the -wal file: every commit writes its frames
//     there. The event comes with the write, before the commit is
//     visible (its frames synced, the WAL index updated), so the notifier
//     then reads PRAGMA data_version on a connection of its own, a few
//     times in the next half second, until it changes; only then does it
//     wake the readers.
//   - PRAGMA data_version polled every pollInterval (1 s) as the backstop,
//     and every fallbackPoll (10 ms) where inotify is not available.
//
// Measured on Linux (BenchmarkWake, README): inotify wakes a reader in
// another Store 0.1-0.3 ms after the commit, and costs nothing at rest;
// polling every 10 ms wakes it after 5 ms on average and costs about 0.5%
// of a core per Store at rest.
type notifier struct {
	s      *Store
	poll   time.Duration
	notify bool // use inotify

	mu      sync.Mutex
	ch      chan struct{} // closed at the next change; nil when none waits
	started bool
	closed  bool
	stop    chan struct{}
	wg      sync.WaitGroup
}

// fallbackPoll is the poll interval where inotify is not available.
const fallbackPoll = 10 * time.Millisecond

func newNotifier(s *Store, poll time.Duration, useInotify bool) *notifier {
	return &notifier{s: s, poll: poll, notify: useInotify, stop: make(chan struct{})}
}

// next returns a channel closed at the next commit to the file, starting
// the watch on first use.
func (n *notifier) next() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch == nil {
		n.ch = make(chan struct{})
	}
	if !n.started && !n.closed {
		n.started = true
		n.wg.Add(1)
		go n.run()
	}
	return n.ch
}

// wake wakes every reader waiting now.
func (n *notifier) wake() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch != nil {
		close(n.ch)
		n.ch = nil
	}
}

func (n *notifier) close() {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	n.closed = true
	close(n.stop)
	n.mu.Unlock()
	n.wg.Wait()
	n.wake()
}

// sleep waits d, false if the notifier is stopped meanwhile.
func (n *notifier) sleep(d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-n.stop:
		return false
	}
}

// settle is how long after a write to the WAL the notifier looks for its
// commit: the gaps between reads of data_version (about 0.5 s in all).
var settle = []time.Duration{0, 200 * time.Microsecond, 500 * time.Microsecond, time.Millisecond, 2 * time.Millisecond,
	5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond,
	100 * time.Millisecond, 200 * time.Millisecond}

func (n *notifier) run() {
	defer n.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-n.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	var conn *sql.Conn
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	var last int64 = -1
	// changed reads data_version on the notifier's own connection and
	// wakes the readers if it moved.
	changed := func() bool {
		if conn == nil {
			c, err := n.s.db.Conn(ctx)
			if err != nil {
				return false
			}
			conn = c
			// A read opens the -wal file, which inotify watches.
			_, _ = conn.ExecContext(ctx, "SELECT count(*) FROM herd_meta")
		}
		var v int64
		if err := conn.QueryRowContext(ctx, "PRAGMA data_version").Scan(&v); err != nil {
			conn.Close()
			conn = nil
			n.wake() // let readers look for themselves
			return true
		}
		if v == last {
			return false
		}
		first := last == -1
		last = v
		if !first {
			n.wake()
		}
		return !first
	}
	changed()

	var events <-chan struct{}
	var w *walWatch
	if n.notify {
		w = watchWAL(n.s.path + "-wal")
		defer w.close()
		events = w.events
	}
	poll := n.poll
	if w == nil || !w.ok() {
		poll = min(poll, fallbackPoll)
	}
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-events:
			for _, d := range settle {
				if !n.sleep(d) {
					return
				}
				if changed() {
					break
				}
			}
		case <-tick.C:
			changed()
			if w != nil && !w.ok() {
				if w.rearm() {
					tick.Reset(n.poll)
				} else {
					tick.Reset(min(n.poll, fallbackPoll))
				}
			}
		}
	}
}
