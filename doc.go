// Package herd spreads the partitions of a group over a changing fleet of
// member processes, through a store the fleet already runs (SQLite on one
// host, Redis, PostgreSQL, or the in-process memstore), with no central
// orchestrator.
//
// A store comes from its URL through package store/storeurl, which picks the
// backend by the scheme (each backend's package, such as store/redisstore,
// also opens it with options of its own):
//
//	st, err := storeurl.Open(ctx, "sqlite://herd.db") // redis://host:6379, postgres://host/db, mem://
//	m, err := herd.Join(ctx, st, herd.Config{
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
//	<-sigterm    // signal.NotifyContext(ctx, syscall.SIGTERM)
//	m.Leave(ctx) // graceful: hand everything over in milliseconds
//
// Join's context is not the signal's: cancelling it is a crash (nothing is
// handed over). Claim.Mark records progress in memory and Claim.Checkpoint
// writes it at once. The examples/ directory has complete programs.
//
// # How it works
//
// Each member holds one session in the store, renewed every SessionTTL/3.
// Each partition has one ownership record: owning session, epoch,
// checkpoint. Every member keeps a replica of the group (sessions, partition
// set, owners): one read when its session opens, then fed by the group's
// log, to which the store appends every change atomically. Every member runs
// the same pure function, balance.Assign, on its replica; it claims the free
// partitions the result gives it, and hands off those it gives to others:
// it cancels the handler, waits for it to return, then releases the record.
// A member whose renewal shows an expired session asks the store to end it,
// which logs the expiry for every replica. docs/design.md has the details.
//
// # What is guaranteed
//
// Assuming the store is linearizable for each group, its clock decides
// expiry and does not jump, and clock rates of member and store differ by
// less than FenceMargin/SessionTTL:
//
//   - At most one member runs a handler for a partition at a time, as long
//     as handlers return when their context is cancelled. A member that
//     cannot renew its session cancels its own handlers at
//     SessionTTL-FenceMargin after its last successful renewal was sent,
//     before the store can expire the session.
//   - Checkpoints are fenced: Claim.Checkpoint writes only if the claim's
//     epoch is current and the session alive, atomically; a member that lost
//     a partition gets ErrNotOwner and never overwrites its successor. A
//     handler's store calls end by the member's fence time and fail with
//     ErrFenced after it.
//   - Epochs strictly increase with every change of owner, even if the store
//     loses its data (a new epoch is max(previous+1, store time in µs)).
//   - The spread is fair (by member weight), sticky, and every rebalance
//     moves the minimum number of partitions once members agree, except
//     that a partition given back is kept off the member that gave it back.
//   - A crashed member's partitions are claimed again shortly after its
//     session expires; a graceful Leave hands them over as soon as its
//     handlers return.
//
// # What is not guaranteed
//
//   - A stopped process (SIGSTOP, a long pause) cannot cancel its handlers;
//     once it resumes its checkpoints are rejected, but writes to other
//     systems are safe only if fenced with Claim.Epoch too.
//   - A handler that ignores cancellation keeps running; its partition is
//     not handed off until it returns (unless ForceHandoff).
//   - A store that loses its data loses what it held. Members start over
//     with new sessions and larger epochs, each putting back the partition
//     set and the last checkpoint it wrote (Store.Restore), and hold back
//     for SessionTTL so that other previous owners can restore first. A
//     checkpoint whose owner does not come back in time is lost, and a
//     member that joins less than SessionTTL after the loss cannot tell and
//     holds nothing back.
//   - Processing is at least once: work after the last checkpoint is
//     repeated by the next owner.
//
// docs/safety.md states the model in full.
package herd
