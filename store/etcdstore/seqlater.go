package etcdstore

import (
	"context"
	"sync"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
)

// A write whose entries went into a pending key returns once it commits:
// readers see pending entries as the log's last ones from then on (see
// pending.go), so sequencing them is left to a goroutine of the store's,
// one per group at a time, which takes every key the store's writes left
// meanwhile in one pass: a claim's handlers start when it returns, two to
// four round trips (a sequencing's) sooner. On one loopback node that is
// within the noise of a scale-out's time; each round trip costs more on a
// cluster whose members are apart. Close ends the
// sequencing under way: a key left pending is in the log all the same,
// and the next writer of the group sequences it.

// seqLater is the background sequencing of the store's pending keys.
type seqLater struct {
	mu  sync.Mutex
	due map[string]*groupSeq // by group key, while a goroutine sequences the group
}

// groupSeq is what the goroutine sequencing one group does next.
type groupSeq struct {
	own []string // the pending keys the store wrote and has not sequenced
	// rs are the reads of q and the pending keys (pendingGet) at rev that
	// the latest write returned (nil: read them).
	rs   []*etcdserverpb.ResponseOp
	rev  int64
	done chan struct{} // closed when the goroutine ends
}

// sequenceLater has the pending keys own of group key g sequenced in the
// background, starting from rs, the reads of q and the pending keys at
// rev (nil: read them).
func (s *Store) sequenceLater(g string, own []string, rs []*etcdserverpb.ResponseOp, rev int64) {
	s.seqs.mu.Lock()
	defer s.seqs.mu.Unlock()
	if q, ok := s.seqs.due[g]; ok {
		q.own = append(q.own, own...)
		if rs == nil || rev > q.rev {
			q.rs, q.rev = rs, rev
		}
		return
	}
	if s.seqs.due == nil {
		s.seqs.due = map[string]*groupSeq{}
	}
	q := &groupSeq{own: own, rs: rs, rev: rev, done: make(chan struct{})}
	if s.goBackground(func() { s.sequenceDue(g, q) }) { // it waits for s.seqs.mu
		s.seqs.due[g] = q
	} // else closed: the group's next writer sequences the keys
}

// sequenceDue sequences q's keys of group key g until none is left, or
// the store is closed.
func (s *Store) sequenceDue(g string, q *groupSeq) {
	defer close(q.done)
	for {
		s.seqs.mu.Lock()
		own, rs, rev := q.own, q.rs, q.rev
		if len(own) == 0 || s.closing.Err() != nil {
			delete(s.seqs.due, g)
			s.seqs.mu.Unlock()
			return
		}
		q.own, q.rs, q.rev = nil, nil, 0
		s.seqs.mu.Unlock()
		ctx, cancel := context.WithTimeout(s.closing, requestTimeout)
		s.sequence(ctx, g, own, rs, rev)
		cancel()
	}
}
