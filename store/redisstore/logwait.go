package redisstore

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// A Changes call at rest waits in one XREAD BLOCK. go-redis does not
// interrupt a command when its context is cancelled, so a wait given up
// (a reader that reads its group anew, a member that stops) would keep its
// connection until the block ends. Where the store can end it, the wait
// runs on a connection of its own whose CLIENT ID it knows, and a call
// whose context ends sends CLIENT UNBLOCK for it through another connection
// of the same server's pool: the XREAD answers as at its timeout, and the
// connection goes back to the pool unblocked before Changes returns.
// Waits that can be ended so last up to defaultChangesBlock (5 minutes, as
// etcd's), the others up to pooledChangesBlock (2 minutes), which bounds
// the connections a reader that gives up its waits often holds. 20 waits
// cancelled, half of them as they start, take 0.23 s in all
// (TestChangesCancelEndsWait, go test -run CancelEndsWait -v).
//
// Where: a *redis.Client (redis://, rediss://, unix://) and a Redis
// Cluster (the wait runs on the node that serves the log's slot, and the
// unblock goes through that node's pool; a wait that meets MOVED or ASK,
// the slot having moved, is made again through the cluster client, for at
// most 2 minutes); and only while the server lets the user run CLIENT ID
// and CLIENT UNBLOCK (an ACL user with docs/security.md's rule without
// +client|id +client|unblock waits 2 minutes). Not with Sentinel
// (redis+sentinel://, which Open sets up): after a failover during a wait
// the unblock would go to the new primary, where the id may name another
// application's client. New cannot tell a failover client from a single
// server's: with Sentinel, use Open (docs/redis.md).

// unblockBound is how long a call whose context ended waits for its XREAD
// to end once unblocked (normally one round trip): past it (a server that
// does not answer), the call returns and the XREAD ends at its read
// deadline (the block plus go-redis' 10 s), in a goroutine the Store owns.
const unblockBound = time.Second

// unblock states of Store.unblock: whether this server lets the user
// unblock a wait.
const (
	unblockUnknown int32 = iota
	unblockAllowed
	unblockDenied
)

// waitNode is the client whose connections a wait on key that can be
// unblocked runs on, or nil where the store cannot unblock one.
func (s *Store) waitNode(ctx context.Context, key string) *redis.Client {
	if s.unblock.Load() == unblockDenied {
		return nil
	}
	switch c := s.client.(type) {
	case *redis.Client:
		return c
	case *redis.ClusterClient:
		n, err := c.MasterForKey(ctx, key)
		if err != nil {
			return nil // the read through the cluster client says why
		}
		return n
	}
	return nil
}

// redirect reports a MOVED or ASK reply: a wait sent to a node that no
// longer serves the slot.
func redirect(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr) && hasAnyPrefix(rerr.Error(), "MOVED ", "ASK ")
}

// waitReply is what a wait's XREAD answered.
type waitReply struct {
	xs  []redis.XStream
	err error
}

// errNoUnblock says a wait did not start on a connection of its own: the
// server does not let the user unblock it; Changes waits on the pool.
var errNoUnblock = errors.New("CLIENT ID or CLIENT UNBLOCK refused")

// errStoreClosed is a wait's error once Close has begun.
var errStoreClosed = errors.New("store is closed")

// xreadUnblockable runs the blocking XREAD args on a connection of node's
// pool taken for it. It returns errNoUnblock when the wait cannot be
// unblocked (the XREAD was not sent).
//
// The goroutine that runs the XREAD returns the connection to the pool
// before it answers, so that when this call returns with its answer the
// connection is free. It is waited for here, or, if the server does not
// answer the unblock within unblockBound, counted in s.waits: Close waits
// for it after closing a client it opened (which ends the read).
func (s *Store) xreadUnblockable(ctx context.Context, node *redis.Client, args *redis.XReadArgs) ([]redis.XStream, error) {
	// Under s.mu, so that no wait is counted once Close waits for them
	// (a WaitGroup's Add must not race with its Wait from zero).
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, errStoreClosed
	}
	s.waits.Add(1)
	s.mu.Unlock()
	ids := make(chan int64, 1)
	done := make(chan waitReply, 1)
	go func() {
		defer s.waits.Done()
		done <- s.waitOn(ctx, node.Conn(), args, ids)
	}()
	select {
	case r := <-done:
		return r.xs, r.err
	case <-ctx.Done():
	}
	bound := time.NewTimer(unblockBound)
	defer bound.Stop()
	select {
	case id := <-ids:
		s.endWait(ctx, node, id, done, bound.C)
	case <-done: // no XREAD sent, or it ended meanwhile
	case <-bound.C: // CLIENT ID unanswered
	}
	return nil, ctx.Err()
}

// waitOn runs the XREAD on conn and closes conn (returning it to the pool)
// before it answers. It first asks the connection's CLIENT ID, and the
// first time for the store whether it may unblock (CLIENT UNBLOCK of its
// own id, which is not blocked: 0, or NOPERM). It sends the id on ids just
// before the XREAD, and sends no XREAD if ctx ended first.
func (s *Store) waitOn(ctx context.Context, conn *redis.Conn, args *redis.XReadArgs, ids chan<- int64) waitReply {
	defer conn.Close()
	id, err := conn.ClientID(ctx).Result()
	if err == nil && s.unblock.Load() == unblockUnknown {
		err = conn.ClientUnblock(ctx, id).Err()
		if err == nil {
			s.unblock.Store(unblockAllowed)
		}
	}
	if denied(err) {
		s.unblock.Store(unblockDenied)
		return waitReply{err: errNoUnblock}
	}
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return waitReply{err: err}
	}
	ids <- id
	// CLIENT ID took a round trip of the time left before ctx's deadline.
	args.Block = blockBefore(ctx, args.Block)
	xs, err := conn.XRead(ctx, args).Result()
	return waitReply{xs, err}
}

// endWait unblocks the XREAD of connection id and waits, until bound
// (unblockBound after the call's context ended), for its goroutine to
// answer on done. CLIENT UNBLOCK answers 0 when the XREAD is not blocked:
// not yet (the unblock went on another connection, and may reach the
// server first) or no longer; it is sent again after 1 ms, then twice as
// long each time (up to 100 ms), until the XREAD answers.
func (s *Store) endWait(ctx context.Context, node *redis.Client, id int64, done <-chan waitReply, bound <-chan time.Time) {
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unblockBound)
	defer cancel()
	retry := time.Millisecond
	for {
		n, err := node.ClientUnblock(uctx, id).Result()
		wait := retry
		switch {
		case err != nil:
			if denied(err) { // the ACL changed: later waits use the pool
				s.unblock.Store(unblockDenied)
			}
			return // the XREAD ends at its read deadline
		case n == 1:
			wait = unblockBound // its answer follows at once
		}
		t := time.NewTimer(wait)
		select {
		case <-done:
			t.Stop()
			return
		case <-bound:
			t.Stop()
			return
		case <-t.C:
		}
		retry = min(2*retry, 100*time.Millisecond)
	}
}

// denied reports a NOPERM reply (an ACL refusal) or an unknown command.
func denied(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr) && hasAnyPrefix(rerr.Error(), "NOPERM", "ERR unknown")
}
