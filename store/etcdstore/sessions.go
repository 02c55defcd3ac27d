package etcdstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/herdhq/herd/store"
)

// Sessions are etcd leases: the liveness key s/<session> is on the
// session's lease, so the cluster deletes it when the TTL passes; m/<session>
// is the session as the log knows it, deleted with a SessionExpired entry
// by the first call that finds its liveness key gone (Changes watches for
// that). A lease's TTL is whole seconds: a TTL is rounded up.

func leaseSeconds(ttl time.Duration) int64 {
	return max(int64((ttl+time.Second-1)/time.Second), 1)
}

// OpenSession implements store.Store. A call that fails on the network or
// its deadline may have opened its session all the same (the cluster ran
// its transaction, its reply was lost): the next OpenSession of the group
// closes it first (store.Ghosts).
func (s *Store) OpenSession(ctx context.Context, group, member string, weight int, ttl time.Duration) (string, error) {
	const op = "open session"
	if err := checkContext(ctx, op); err != nil {
		return "", err
	}
	if err := store.ValidateOpenSession(group, member, weight, ttl); err != nil {
		return "", fmt.Errorf("etcdstore: %s: %w", op, err)
	}
	if err := ctx.Err(); err != nil {
		return "", failure(op, err)
	}
	return s.ghosts.OpenSession(group, ttl, "etcdstore: "+op,
		func(id string) error {
			if err := s.CloseSession(ctx, group, id); err != nil {
				return fmt.Errorf("etcdstore: %s: closing session %s, which a call that failed may have opened: %w", op, id, err)
			}
			return nil
		},
		func(id string) (string, error) {
			if err := s.create(ctx, group, id, member, weight, ttl); err != nil {
				return "", failure(op, err)
			}
			return "ok", nil
		})
}

// create opens session id on a lease of its own. When the session's
// transaction fails, its lease is revoked in the background (the cluster
// may have run it, and a request of it still on its way would find the
// lease gone): the call fails on its deadline, not on the revocation's.
func (s *Store) create(ctx context.Context, group, id, member string, weight int, ttl time.Duration) error {
	g := s.groupKey(group)
	// The read of the sequence (for a write logged at once) goes with the
	// grant: one round trip less for a joining member.
	var resp *clientv3.GetResponse
	var readErr error
	read := make(chan struct{})
	go func() {
		defer close(read)
		resp, readErr = s.c.Get(withLeader(ctx), g+"q")
	}()
	l, err := s.c.Grant(withLeader(ctx), leaseSeconds(ttl))
	<-read
	if err != nil {
		return err
	}
	info := mustJSON(sessionInfo{Member: member, Weight: weight, TTL: ttl, Lease: l.ID})
	// The session's keys are new: the write compares nothing.
	if err := readErr; err != nil {
		s.revokeLater(l.ID)
		return err
	}
	w := &write{g: g, group: group, seq: seqOf(resp.Kvs)}
	w.op(clientv3.OpPut(g+"s/"+id, "", clientv3.WithLease(l.ID)))
	w.put(g+"m/"+id, info)
	w.append(store.Change{Kind: store.SessionOpened, Session: id, Member: member, Weight: weight})
	if s.beforeOpenCommit != nil {
		s.beforeOpenCommit()
	}
	if _, err := s.commit(ctx, w); err != nil {
		s.revokeLater(l.ID)
		return err
	}
	s.mu.Lock()
	s.leases[id] = lease{id: l.ID, ttl: ttl}
	s.mu.Unlock()
	return nil
}

// revokeLater revokes a lease in a goroutine of the store's own, so that
// the call done with it keeps to its deadline; Close cancels and waits for
// it. Once Close has begun, the lease is left to its TTL.
func (s *Store) revokeLater(id clientv3.LeaseID) {
	s.goBackground(func() { s.revoke(id) })
}

// revoke revokes a lease, bounded by 5 s and by Close, for a call that is
// done with it.
func (s *Store) revoke(id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(s.closing, 5*time.Second)
	defer cancel()
	_, _ = s.c.Revoke(ctx, id)
}

// KeepAlive implements store.Store: one keep-alive of the session's lease
// (a new lease when the TTL changes), and one read of the group's sessions
// for next.
func (s *Store) KeepAlive(ctx context.Context, group, session string, ttl time.Duration) (time.Duration, error) {
	const op = "keep alive"
	if err := checkContext(ctx, op); err != nil {
		return 0, err
	}
	if err := store.ValidateKeepAlive(group, session, ttl); err != nil {
		return 0, fmt.Errorf("etcdstore: %s: %w", op, err)
	}
	if err := ctx.Err(); err != nil {
		return 0, failure(op, err)
	}
	g := s.groupKey(group)
	s.mu.Lock()
	l, ok := s.leases[session]
	s.mu.Unlock()
	if !ok {
		resp, err := s.c.Get(withLeader(ctx), g+"m/"+session)
		if err != nil {
			return 0, failure(op, err)
		}
		if len(resp.Kvs) == 0 {
			return 0, fmt.Errorf("etcdstore: %s %q: %w", op, session, store.ErrSessionExpired)
		}
		var info sessionInfo
		if err := json.Unmarshal(resp.Kvs[0].Value, &info); err != nil {
			return 0, fmt.Errorf("etcdstore: %s %q: session record: %v: %w", op, session, err, store.ErrCorrupt)
		}
		l = lease{id: info.Lease, ttl: info.TTL}
	}
	var err error
	if leaseSeconds(l.ttl) == leaseSeconds(ttl) {
		_, err = s.c.KeepAliveOnce(withLeader(ctx), l.id)
	} else {
		l, err = s.regrant(ctx, g, session, l, ttl)
	}
	if errors.Is(err, rpctypes.ErrLeaseNotFound) || errors.Is(err, store.ErrSessionExpired) {
		s.forget(session)
		return 0, fmt.Errorf("etcdstore: %s %q: %w", op, session, store.ErrSessionExpired)
	}
	if err != nil {
		return 0, failure(op, err)
	}
	s.mu.Lock()
	s.leases[session] = l
	s.mu.Unlock()
	live, err := s.expireDue(ctx, op, group)
	if err != nil {
		return 0, err
	}
	return nextExpiry(live), nil
}

func (s *Store) forget(session string) {
	s.mu.Lock()
	delete(s.leases, session)
	s.mu.Unlock()
}

// regrant moves a live session to a new lease of ttl.
func (s *Store) regrant(ctx context.Context, g, session string, old lease, ttl time.Duration) (lease, error) {
	resp, err := s.c.Get(withLeader(ctx), g+"m/"+session)
	if err != nil {
		return old, err
	}
	if len(resp.Kvs) == 0 {
		return old, store.ErrSessionExpired
	}
	var info sessionInfo
	if err := json.Unmarshal(resp.Kvs[0].Value, &info); err != nil {
		return old, fmt.Errorf("session record: %v: %w", err, store.ErrCorrupt)
	}
	nl, err := s.c.Grant(withLeader(ctx), leaseSeconds(ttl))
	if err != nil {
		return old, err
	}
	info.TTL, info.Lease = ttl, nl.ID
	t, err := s.c.Txn(withLeader(ctx)).
		If(clientv3.Compare(clientv3.Version(g+"s/"+session), ">", 0),
			clientv3.Compare(clientv3.ModRevision(g+"m/"+session), "=", resp.Kvs[0].ModRevision)).
		Then(clientv3.OpPut(g+"s/"+session, "", clientv3.WithLease(nl.ID)), clientv3.OpPut(g+"m/"+session, mustJSON(info))).
		Commit()
	if err != nil || !t.Succeeded {
		s.revoke(nl.ID)
		if err == nil {
			err = store.ErrSessionExpired
		}
		return old, err
	}
	s.revoke(old.id)
	return lease{id: nl.ID, ttl: ttl}, nil
}

// CloseSession implements store.Store. It returns once the session's
// keys are deleted; its lease is revoked in the background.
func (s *Store) CloseSession(ctx context.Context, group, session string) error {
	const op = "close session"
	if err := checkContext(ctx, op); err != nil {
		return err
	}
	if err := store.ValidateCloseSession(group, session); err != nil {
		return fmt.Errorf("etcdstore: %s: %w", op, err)
	}
	if err := ctx.Err(); err != nil {
		return failure(op, err)
	}
	g := s.groupKey(group)
	var info sessionInfo
	found := false
	err := retry(ctx, op, func() (bool, error) {
		resp, err := s.c.Txn(withLeader(ctx)).Then(clientv3.OpGet(g+"m/"+session),
			clientv3.OpGet(g+"s/"+session, clientv3.WithKeysOnly()), clientv3.OpGet(g+"q")).Commit()
		if err != nil {
			return false, failure(op, err)
		}
		m, live := resp.Responses[0].GetResponseRange().Kvs, resp.Responses[1].GetResponseRange().Kvs
		if len(m) == 0 {
			return true, nil // unknown, or closed already
		}
		found = json.Unmarshal(m[0].Value, &info) == nil
		w := &write{g: g, group: group, seq: seqOf(resp.Responses[2].GetResponseRange().Kvs)}
		w.unchanged(g+"m/"+session, m[0].ModRevision)
		w.op(clientv3.OpDelete(g + "m/" + session))
		kind := store.SessionExpired
		if len(live) > 0 {
			kind = store.SessionClosed
			w.alive(session, live[0].CreateRevision)
			w.op(clientv3.OpDelete(g + "s/" + session))
		} else {
			w.dead(session)
		}
		w.append(store.Change{Kind: kind, Session: session})
		ok, err := s.commit(ctx, w)
		if err != nil {
			return false, failure(op, err)
		}
		return ok, nil
	})
	if err == nil && found {
		if s.afterCloseCommit != nil {
			s.afterCloseCommit()
		}
		// The session's keys are gone: its lease holds none and ends with
		// its TTL anyway. Revoking it in the background keeps the caller
		// to its deadline (an open that closes a session a failed open
		// may have opened has its own calls to make).
		s.revokeLater(info.Lease)
	}
	s.forget(session)
	return err
}

// ExpireSessions implements store.Store.
func (s *Store) ExpireSessions(ctx context.Context, group string) (time.Duration, error) {
	const op = "expire sessions"
	if err := checkContext(ctx, op); err != nil {
		return 0, err
	}
	if err := store.ValidateGroup(group); err != nil {
		return 0, fmt.Errorf("etcdstore: %s: %w", op, err)
	}
	if err := ctx.Err(); err != nil {
		return 0, failure(op, err)
	}
	live, err := s.expireDue(ctx, op, group)
	if err != nil {
		return 0, err
	}
	return nextExpiry(live), nil
}

// liveSession is a logged session whose lease is alive.
type liveSession struct {
	id   string
	info sessionInfo
}

// nextExpiry is how long no session can expire: the shortest TTL of the
// live sessions (each was renewed at most its TTL ago, so none expires
// sooner; the cluster ends them on time whatever this says).
func nextExpiry(live []liveSession) time.Duration {
	var next time.Duration
	for _, l := range live {
		if next == 0 || l.info.TTL < next {
			next = l.info.TTL
		}
	}
	return next
}

// expireDue logs the end of every logged session of group whose lease is
// gone and returns the live ones.
func (s *Store) expireDue(ctx context.Context, op, group string) ([]liveSession, error) {
	g := s.groupKey(group)
	var live []liveSession
	err := retry(ctx, op, func() (bool, error) {
		resp, err := s.c.Txn(withLeader(ctx)).Then(clientv3.OpGet(g+"m/", clientv3.WithPrefix()),
			clientv3.OpGet(g+"s/", clientv3.WithPrefix(), clientv3.WithKeysOnly()), clientv3.OpGet(g+"q")).Commit()
		if err != nil {
			return false, failure(op, err)
		}
		alive := map[string]bool{}
		for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
			alive[strings.TrimPrefix(string(kv.Key), g+"s/")] = true
		}
		live = live[:0]
		w := &write{g: g, group: group, seq: seqOf(resp.Responses[2].GetResponseRange().Kvs)}
		for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
			id := strings.TrimPrefix(string(kv.Key), g+"m/")
			if alive[id] {
				var info sessionInfo
				_ = json.Unmarshal(kv.Value, &info) // a malformed one counts with TTL 0
				live = append(live, liveSession{id: id, info: info})
				continue
			}
			if len(w.log) < expireChunk {
				w.unchanged(string(kv.Key), kv.ModRevision)
				w.dead(id)
				w.op(clientv3.OpDelete(string(kv.Key)))
				w.append(store.Change{Kind: store.SessionExpired, Session: id})
			}
		}
		if len(w.log) == 0 {
			return true, nil
		}
		_, err = s.commit(ctx, w)
		if err != nil {
			return false, failure(op, err)
		}
		return false, nil // read again: more may be due
	})
	return live, err
}
