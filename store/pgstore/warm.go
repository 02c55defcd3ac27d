package pgstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// warmUpSession is a session id of the form the store makes, used only in
// the warm-up transaction.
const warmUpSession = "AAAAAAAAAAAAAAAAAAAAAAAAAA"

// warmUp returns the pool's AfterConnect hook. A new server connection
// compiles each PL/pgSQL function and plans each of its statements the
// first time it runs them, a few milliseconds per function; a member whose
// handlers release their partitions at once would otherwise pay that on
// each new connection, on its critical path. The hook runs every operation
// once, in one round trip, in a transaction it rolls back (in a group of
// its own, warmUpGroup), so the connection's functions, plans and prepared
// statements are ready before it serves a call. It never fails the
// connection: on a server where the schema does not exist yet it just does
// nothing useful.
func warmUp(q queries) func(context.Context, *pgx.Conn) error {
	return func(ctx context.Context, conn *pgx.Conn) error {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		tx, err := conn.Begin(ctx)
		if err != nil {
			return nil
		}
		defer func() { _ = tx.Rollback(ctx) }()
		g, id, limit := warmUpGroup(), warmUpSession, int32(100)
		b := &pgx.Batch{}
		b.Queue(q.open, g, id, "warm-up", int32(1), int64(60_000_000), limit)
		b.Queue(q.claim, g, id, []string{"p"}, limit)
		b.Queue(q.checkpoint, g, "p", "1", []byte{})
		b.Queue(q.release, g, id, []string{"p"}, []string{"1"}, false, limit)
		b.Queue(q.keepAlive, g, id, int64(60_000_000), limit)
		b.Queue(q.expire, g, limit)
		b.Queue(q.snapshot, g)
		b.Queue(q.changes, g, int64(0), int64(2))
		b.Queue(q.records, g, []string{"p"})
		b.Queue(q.close, g, id, limit)
		_ = tx.SendBatch(ctx, b).Close()
		return nil
	}
}

// warmIdle warms up the pool's idle connections: those made before this
// store created the schema, whose warm-up found nothing to run.
func (s *Store) warmIdle(ctx context.Context) {
	warm := warmUp(s.q)
	for _, c := range s.pool.AcquireAllIdle(ctx) {
		_ = warm(ctx, c.Conn())
		c.Release()
	}
}

// warmOpen runs OpenSession's function once, on the connection the call
// is about to use, in a group of this store's own and a transaction it
// rolls back, once per store: its first call on a new connection compiles
// the functions it calls and plans their statements, about 7 ms, most of
// it while it holds the group's lock, where 16 members opening their
// sessions at once queued behind each other (0.28 s median from store
// opened to session opened, 16 member processes on PostgreSQL, 2 cores).
// Compiled here, outside any group's lock, they compile side by side.
// A failure is the real call's to report.
func (s *Store) warmOpen(ctx context.Context) {
	if !s.openWarm.CompareAndSwap(false, true) {
		return
	}
	g := warmUpGroup()
	_ = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, s.q.open, g, warmUpSession, "warm-up", int32(1), int64(60_000_000), int32(100))
		if err == nil {
			err = errRollback
		}
		return err
	})
}

// warmUpGroup is a group name for one warm-up: a control character no
// caller's group can hold, and a random part, so that warm-ups running
// together (members starting at once, each connecting) do not wait for
// each other's insert of the group and its lock (TestWarmUpsDoNotQueue).
func warmUpGroup() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "\x01herd warm-up " + hex.EncodeToString(b[:])
}

// errRollback makes pgx.BeginFunc roll back.
var errRollback = errors.New("rolled back")
