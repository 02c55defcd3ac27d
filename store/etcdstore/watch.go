package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A reader of a group's log waits on one watch per group and store, made
// when a reader first waits and kept until the store closes or no reader
// waited on it for watchIdle. Its watches start at the cluster's current
// revision, and a reader waits for their events after the revision of its
// read (a reader that read before the watch's start reads again once it
// has started). A watch made per wait would start at the revision after the
// reader's read; etcd sends a watch that starts at a revision the cluster
// has passed (another write came between the read and the watch, as it
// nearly always does while a fleet rebalances) nothing until its sync loop
// next runs, every 100 ms, and it cost the cluster a watch stream per wait.

// watchIdle is how long a group's watch is kept with no reader waiting on
// it (Store.watchIdle): a member reads between its waits.
const watchIdle = time.Minute

// logWatch is the watch of one group's log keys: the sequence q (put with
// every sequenced key, deleted with the group), the pending keys (u/), and
// the deletions of the sessions' liveness keys (a lease ended).
type logWatch struct {
	g      string
	cancel context.CancelFunc
	ready  chan struct{} // closed once the watches are made (from) or ended (err)
	from   int64         // every event after this revision is seen

	mu     sync.Mutex
	news   int64  // the revision of the latest pending key or deletion of q
	seqRev int64  // the revision of the latest put of q
	maxSeq uint64 // the largest seq q was put with
	// pending are the values of the pending keys, as of the watch's
	// events up to pendRev: a reader reads only those of keys written
	// after it (the watch sends each value to every reader anyway).
	pending map[string][]byte
	pendRev int64
	leases  int64 // the revision of the latest end of a lease
	err     error // why the watch ended (nil while it runs)
	wake    chan struct{}
	readers int // the readers using it
	idle    int // counts the readers' ends: the watch ends watchIdle after the last, if still the last
}

// logWatches are the store's watches, by group key.
type logWatches struct {
	mu sync.Mutex
	m  map[string]*logWatch
}

// watchLog is the watch of group key g's log, made if the store has none,
// with the caller counted as its reader until it calls s.unwatch; an error
// if the store is closed.
func (s *Store) watchLog(g string) (*logWatch, error) {
	s.watches.mu.Lock()
	defer s.watches.mu.Unlock()
	w := s.watches.m[g]
	if w == nil {
		w = &logWatch{g: g, ready: make(chan struct{}), wake: make(chan struct{})}
		wctx, cancel := context.WithCancel(withLeader(s.closing))
		w.cancel = cancel
		if !s.goBackground(func() { s.runWatch(wctx, w) }) {
			cancel()
			return nil, errors.New("the store is closed")
		}
		if s.watches.m == nil {
			s.watches.m = map[string]*logWatch{}
		}
		s.watches.m[g] = w
	}
	w.mu.Lock()
	w.readers++
	w.mu.Unlock()
	return w, nil
}

// readyFrom is the revision after which w sees every event, once its
// watches are made (ok).
func (w *logWatch) readyFrom() (from int64, ok bool) {
	select {
	case <-w.ready:
		return w.from, true
	default:
		return 0, false
	}
}

// unwatch ends the caller's use of w; the watch ends once no reader used
// it for watchIdle.
func (s *Store) unwatch(w *logWatch) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.idle++
	if w.readers--; w.readers > 0 || w.err != nil {
		return
	}
	last := w.idle
	time.AfterFunc(s.watchIdle, func() {
		// Under s.watches.mu, as watchLog counts a new reader.
		s.watches.mu.Lock()
		w.mu.Lock()
		idle := w.idle == last && w.readers == 0
		if idle && s.watches.m[w.g] == w {
			delete(s.watches.m, w.g)
		}
		w.mu.Unlock()
		s.watches.mu.Unlock()
		if idle {
			w.cancel()
		}
	})
}

// dropWatch forgets w: the next reader of its group makes a new one.
func (s *Store) dropWatch(w *logWatch) {
	s.watches.mu.Lock()
	if s.watches.m[w.g] == w {
		delete(s.watches.m, w.g)
	}
	s.watches.mu.Unlock()
}

// runWatch makes w's watches and notes their events until ctx ends or a
// watch fails.
func (s *Store) runWatch(ctx context.Context, w *logWatch) {
	defer w.cancel()
	g := w.g
	// q, not l/: every sequenced key is put with q, whose value is small
	// (an l/ key holds entries the reader reads anyway).
	chans := []clientv3.WatchChan{
		s.c.Watch(ctx, g+"q", clientv3.WithCreatedNotify()),
		s.c.Watch(ctx, g+"u/", clientv3.WithPrefix(), clientv3.WithCreatedNotify()),
		s.c.Watch(ctx, g+"s/", clientv3.WithPrefix(), clientv3.WithFilterPut(), clientv3.WithCreatedNotify()),
	}
	created := 0
	var err error
	for err == nil {
		var wr clientv3.WatchResponse
		var ok bool
		select {
		case wr, ok = <-chans[0]:
		case wr, ok = <-chans[1]:
		case wr, ok = <-chans[2]:
		}
		switch {
		case !ok && ctx.Err() != nil:
			err = fmt.Errorf("the watch ended: %w", ctx.Err())
		case !ok:
			err = errors.New("the watch ended")
		case wr.Err() != nil:
			err = wr.Err()
		case wr.Created:
			// Each watch sees the events after the revision it was
			// made at; w's readers read after the last one's.
			if created++; created <= len(chans) {
				w.from = max(w.from, wr.Header.Revision)
			}
			if created == len(chans) {
				close(w.ready)
			}
		default:
			w.note(wr)
		}
	}
	s.dropWatch(w)
	w.mu.Lock()
	w.err = err
	close(w.wake)
	w.mu.Unlock()
	if created < len(chans) {
		close(w.ready)
	}
}

// note records the events of wr and wakes the readers.
func (w *logWatch) note(wr clientv3.WatchResponse) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ev := range wr.Events {
		k, rev := string(ev.Kv.Key), ev.Kv.ModRevision
		if strings.HasPrefix(k, w.g+"s/") {
			w.leases = max(w.leases, rev)
			continue
		}
		if strings.HasPrefix(k, w.g+"u/") {
			w.pendRev = max(w.pendRev, rev)
			if ev.Type == mvccpb.DELETE { // sequenced
				delete(w.pending, k)
				continue
			}
			if w.pending == nil {
				w.pending = map[string][]byte{}
			}
			w.pending[k] = ev.Kv.Value
		}
		if k == w.g+"q" && ev.Type == mvccpb.PUT {
			if seq, err := decodeSeq([]*mvccpb.KeyValue{ev.Kv}); err == nil {
				w.seqRev, w.maxSeq = max(w.seqRev, rev), max(w.maxSeq, seq.Seq)
				continue
			}
		}
		w.news = max(w.news, rev) // a pending key, q deleted (or not to be decoded: the reader reports it)
	}
	close(w.wake)
	w.wake = make(chan struct{})
}

// wait waits for the watch to be made, then for an event after revision
// rev that a reader at seq has not read (none if rev is before the watch:
// the reader reads again): a pending key, q put past seq (a sequencing of entries up to seq
// moves entries the reader has), the deletion of q, or the end
// of a lease (expired); until ctx ends, until, or the watch ends (its
// error).
func (w *logWatch) wait(ctx context.Context, rev int64, seq uint64, until time.Time) (expired bool, err error) {
	t := time.NewTimer(time.Until(until))
	defer t.Stop()
	select {
	case <-w.ready:
	case <-t.C:
		return false, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
	if rev < w.from {
		// Read before the watch was made: the reader reads again (unless
		// the watch failed).
		w.mu.Lock()
		err := w.err
		w.mu.Unlock()
		return false, err
	}
	for {
		w.mu.Lock()
		news, seqRev, maxSeq, leases, err, wake := w.news, w.seqRev, w.maxSeq, w.leases, w.err, w.wake
		w.mu.Unlock()
		switch {
		case news > rev || seqRev > rev && maxSeq > seq:
			return false, nil
		case leases > rev:
			return true, nil
		case err != nil:
			return false, err
		}
		select {
		case <-wake:
		case <-t.C:
			return false, nil
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

// pendingValues is a copy of the values of the pending keys the watch saw
// written and not deleted, by key, and the revision of its latest event of
// a pending key; none for a nil w.
func (w *logWatch) pendingValues() (map[string][]byte, int64) {
	values := map[string][]byte{}
	if w == nil {
		return values, 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, v := range w.pending {
		values[k] = v
	}
	return values, w.pendRev
}
