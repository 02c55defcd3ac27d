// Package balance computes the target owner of every partition for a fleet of
// members. It is a pure, deterministic function of its [Input]: every member
// of the fleet runs [Assign] on the same snapshot and gets the same answer.
// There is no randomness, no clock, and no dependence on map iteration order
// or on the order of the input slices.
//
// # Normalisation
//
// Members and partitions are de-duplicated by ID; the first occurrence in the
// slice wins (only a member's Weight can differ between duplicates, so only
// conflicting duplicate members make the result depend on slice order).
// Weights <= 0 are treated as 1. An entry of Input.Owners counts only if both
// the partition and the member are known; anything else is treated as
// unowned. A partition's current owner is "valid" exactly when it counts.
// Partition weights are carried but not used: balancing is by count.
//
// # Quotas
//
// With P partitions and total member weight W, member i with weight w_i has
// the exact share s_i = P*w_i/W. Its base quota is floor(s_i); the
// R = P - sum(floor(s_i)) remaining "+1" slots go to members with a non-zero
// fractional part, so every quota is floor(s_i) or ceil(s_i) and the quotas
// sum to P (with unit weights: every member gets floor(P/N) or ceil(P/N)).
// The +1 slots are handed out in this order:
//
//  1. members that currently hold more than their base quota (a +1 there
//     keeps a partition where it is, a +1 elsewhere keeps nothing);
//  2. larger fractional part first (the largest-remainder method);
//  3. higher hash of the member ID, then smaller member ID.
//
// Without current owners this is exactly the largest-remainder (Hamilton)
// method. Rule 1 makes the quota vector maximise sum_i min(held_i, quota_i)
// over all vectors in which every member gets floor or ceil of its share,
// which is what makes the number of moves minimal (see [MinMoves]).
//
// # Assignment
//
//  1. Sticky: a member that holds no more than its quota keeps everything it
//     holds. A member that holds more keeps the quota partitions with the
//     highest rendezvous score hash(partition, member) (ties by partition ID)
//     and frees the rest.
//  2. Freed and unowned partitions (the "pool") go to members below quota.
//     Each missing unit k of member m becomes a slot at ring position
//     hash(m, k); each pool partition p sits at hash(p). Pool partitions are
//     taken in ring order and each takes the first free slot clockwise from
//     its position (consistent hashing with bounded loads, capacity one per
//     slot; taken in ring order, the first free slot is the later of the
//     partition's first candidate and the slot after the last one taken,
//     until the pool wraps around). The pool has exactly
//     as many partitions as there are slots, so every partition is placed and
//     every member ends at exactly its quota. The spread is pseudo-random,
//     and a small change to the pool only perturbs the placement locally.
//     When some partitions are kept, the pool first goes to the "ideal"
//     member of each partition (its target in the assignment computed with
//     no owners at all, with the same quotas), taken in ring order while
//     that member is below quota. The rest, still in ring order, each goes
//     to the first member below quota clockwise from its position on a
//     second ring, of 16 fixed points per member placed by the member's
//     hash alone. So a fleet part way through carrying out an assignment
//     (each member claims its share in batches, owners hand partitions off
//     one batch at a time, and members see each other's moves at different
//     moments) is given the same assignment again, whichever moves are
//     done: a partition that reached its target takes one unit of that
//     member's room, and every other partition finds the same members with
//     room at its turn (see fill.go). Members never race for a partition
//     the plan they read a moment earlier gave to another. The pool moves
//     either way, so the moves stay minimal. The ideal and the second ring
//     are cached by an [Assigner] while the partitions, members and quotas
//     stay the same, and an ideal's ring of slots is made from the last
//     one's (the slots of members that stay are kept, the others' merged
//     in).
//
// # Guarantees
//
//   - Every partition is assigned to exactly one known member, and every
//     member gets exactly its quota from [Quotas].
//   - Moves(in, Assign(in)) == MinMoves(in): no assignment in which every
//     member gets floor or ceil of its share moves fewer live-owned
//     partitions. In particular nothing moves when the current spread is
//     already fair, and feeding the output back in as Owners moves nothing.
//   - The result does not depend on the order of Members or Partitions.
//   - It never panics on odd input (no members, no partitions, unknown
//     owners, non-positive or huge weights).
//
// # Partitions to avoid
//
// [Avoid] is a separate, deterministic step after [Assigner.AssignSorted]:
// it moves each partition whose target is a member it must avoid (herd: the
// session that gave it back, while that session lives) to its current owner
// if that is another member, else to the least loaded other member (ties by
// rendezvous score). Assign itself knows nothing of it, and the guarantees
// below are Assign's; after Avoid, quotas hold up to one partition per
// avoided placement.
//
// # Complexity
//
// For N members and P partitions: O(N log N) for the quotas, O(P) for
// de-duplication and the sticky pass, O(K) to pick the partitions
// over-quota members keep (K of them in total, a selection), O(F log F)
// to sort the part of the pool of F freed/unowned partitions whose ideal
// members are short of room, O(P log P) for an ideal's ring order and its
// slots (once per partition set; a new membership's slots are merged in
// O(P + D log D) for D slots new to it), and O(P) for the matching.
// Overall O(N log N + P log P) time and O(N + P) memory, with no O(N*P) term.
// (Rankings and ring orders of 256 or more entries are sorted by a radix
// sort on their 64-bit hashes, ties by ID: the same order as a comparison
// sort, in linear time.)
//
// [Assign] builds maps of every partition. A caller that recomputes the
// assignment of a large group after every change (each herd member does)
// uses an [Assigner]: the same result from sorted slices and owner indices,
// with its memory and the partitions' hashes reused from one call to the
// next.
package balance
