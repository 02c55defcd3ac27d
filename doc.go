// Package herd spreads the partitions of a group over a changing fleet of
// member processes, through a store the fleet already runs (SQLite on one
// host, Redis, PostgreSQL, or the in-process memstore), with no central
// orchestrator.
//
// A store comes from its URL, through package store/storeurl, which picks
// the backend by the scheme (each backend's package, such as
// store/redisstore, also opens it with options of its own):
//
//	st, err := storeurl.Open(ctx, "sqlite://herd.db") // redis://host:6379, postgres://host/db, mem://
//	m, err := herd.Join(ctx, st, herd.Config{Group: "orders", Partitions: herd.Numbered(32), Handler: handle})
//	defer m.Leave(ctx)
//
// In full:
//
//	m, err := herd.Join(context.Background(), st, herd.Config{
//		Group:      "orders",
//		Partitions: herd.Numbered(32),
//		Handler: func(c *herd.Claim) error {
//			pos := c.LastCheckpoint() // where the previous owner stopped
//			for c.Context().Err() == nil { // cancelled on handoff or loss
//				pos = process(c.Partition, pos)
//				if err := c.Mark(pos); err != nil { // written every CheckpointInterval and before the handoff
//					return err
//				}
//			}
//			return nil // the partition is released after this returns
//		},
//	})
//	...
//	<-sigterm             // signal.NotifyContext(ctx, syscall.SIGTERM)
//	m.Leave(ctx)          // graceful: hand everything over in milliseconds
//
// Join's context is not the signal's: cancelling it is a crash (nothing is
// handed over). Claim.Mark records progress in memory and Claim.Checkpoint
// writes it at once; see Mark for which to use when. The examples/
// directory has complete programs: a Redis stream consumer and fencing of
// writes to another system with Claim.Epoch.
//
// # How it works
//
// Each member holds one session in the store, renewed by one goroutine
// every SessionTTL/3 whatever the number of partitions. Each partition has
// one ownership record: owning session, epoch, checkpoint. Every member
// keeps a replica of the group (live sessions, partition set, owners): one
// snapshot read when its session opens, then fed by the group's log, to
// which the store appends every change in the same atomic step. Every
// member runs the same pure function, balance.Assign, on its replica to
// compute the target owner of every partition; no leader is needed and
// members do not race for partitions. A member claims (in batches) the free
// partitions the target gives it and hands off those it gives to others: it
// cancels the handler, waits for it to return, then releases the record.
// A rebalance thus costs the store the entries of its changes, not a read
// of the group per member per change. Each renewal tells a member when the
// group's earliest session expires; if that member is not renewed by then,
// the member asks the store to expire it (ExpireSessions), which logs the
// expiry for every replica. A member reads the whole group only when it
// starts a session, when the log cannot be continued from its copy
// (trimmed past it, or the store lost data), while a record edited by
// hand is broken (which the log cannot show) every PollInterval until it
// is repaired, and as a slow backstop every ResyncInterval (10 minutes).
// Otherwise it checks its own records every PollInterval.
//
// A handler that keeps failing on one member can give its partition back
// by returning an error wrapping ErrGiveBack: the partition is released
// with a mark naming the member's session (store.Ownership.GivenBack), and
// while that session lives every member places the partition on another
// live member if there is one (balance.Avoid, after balance.Assign).
//
// # What is guaranteed
//
// Under these assumptions: the store is linearizable for each group (every
// conditional operation is atomic), the store's clock decides expiry and
// does not jump, and clock rates of the member's host and the store differ
// by less than FenceMargin/SessionTTL (1% ... 10% by default):
//
//   - At most one member runs a handler for a partition at a time, as long
//     as handlers return when their context is cancelled. A new owner can
//     claim a partition only after its old owner released it (after the
//     handler returned) or after the old owner's session expired in the
//     store. A member that cannot renew its session cancels its own
//     handlers at SessionTTL-FenceMargin after its last successful renewal
//     was sent, which is before the store can expire the session.
//   - Checkpoints are fenced: Claim.Checkpoint writes only if the claim's
//     epoch is still current and the session alive, in one atomic store
//     operation. A member that lost a partition, however it lost it, can
//     never overwrite its successor's progress; it gets ErrNotOwner. This
//     holds across a data loss too: the checkpoint a member puts back
//     after losing its session (store.Store.Restore) is written only where
//     the partition has no record, or a released one with a lower epoch
//     (put back by an earlier owner), so of all the owners that restore a
//     partition the last one wins, whatever the order.
//   - A handler's store calls (Claim.Checkpoint) end by the time its member
//     would fence itself, whatever context the handler passes them, and
//     fail at once with ErrFenced after that time or once the session is
//     lost: a store that stops answering, or a client whose timeout is
//     longer than FenceMargin, cannot hold a handler inside herd while a
//     successor runs its partition. A final checkpoint after a graceful
//     handoff is bounded the same way, not refused.
//   - Epochs strictly increase with every change of owner and are never
//     reused, even if the store loses its data: a new epoch is
//     max(previous+1, store time in microseconds).
//   - The spread is fair (each member floor or ceil of its share, by
//     member weight; partitions count one each, their weights are not
//     used yet), sticky (nothing moves when it is already fair) and every
//     rebalance moves the minimum number of partitions, once members agree
//     on the snapshot. A partition given back (ErrGiveBack) is the
//     exception: kept off the member that gave it back, it may leave its
//     new owner one over its share and the giver one under.
//   - A crashed member's partitions are claimed again shortly after its
//     session expires (SessionTTL after its last renewal); a graceful Leave
//     hands them over as soon as its handlers return.
//
// # What is not guaranteed
//
//   - A process that is stopped (SIGSTOP, a long GC pause, a VM freeze)
//     cannot cancel its own handlers while stopped. If it stays stopped
//     past its TTL, others take its partitions; when it resumes, its
//     handler may run for a moment before the member notices, but every
//     checkpoint it tries is rejected by the epoch. Writes to other
//     systems are safe only if they are fenced with Claim.Epoch too.
//   - A handler that ignores cancellation keeps running; its partition is
//     not handed off until it returns (unless ForceHandoff), and after a
//     crash or fence its writes are rejected but its side effects are not.
//   - A store that loses its data (Redis restarted without persistence,
//     after an outage of any length) loses what it held; the members
//     notice that their sessions are gone (or fence themselves while it is
//     unreachable), stop their handlers and start over with new sessions
//     and fresh, larger epochs. Before claiming anything, each puts back
//     the partition set and the last checkpoint it wrote for each
//     partition it held. A member back from a lost or fenced session
//     leaves record-less partitions alone for SessionTTL, and every
//     partition without a live owner if the store shows it lost data, so
//     that the other previous owners can restore first; the partitions
//     are therefore placed again about SessionTTL after the first member
//     is back. What is still lost: a checkpoint whose last owner does not
//     come back within SessionTTL of the first member back (it crashed
//     too, or stayed cut off): the partition resumes from the newest
//     checkpoint put back by an earlier owner, or from none; the
//     checkpoint of a partition that was released (handed off, or its
//     owner gone) and not claimed again before the loss, which only the
//     store held; and a partition set no surviving member had seen
//     (members that pass Config.Partitions write it at Join).
//   - A member that joins less than SessionTTL after the store lost its
//     data cannot tell (an empty store looks like a new group) and holds
//     nothing back: it may claim a partition before its previous owner
//     restored it, or while a previous owner that has not noticed the loss
//     still runs it, until that owner fences itself. The random fault test
//     (fault_test.go) checks exactly these limits: it counts such restarts
//     and overlaps apart and fails on any other.
//   - Processing is at least once: a partition resumes from its last
//     checkpoint, so work done after it is repeated by the next owner.
package herd
