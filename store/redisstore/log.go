package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/herdhq/herd/store"
)

// The group's log is a Redis stream, <prefix>:{<b64 group>}:log, appended
// inside the very script that makes each change, so the change and its entry
// are one atomic step. Its entry ids are "<seq>-<tag>": the sequence number
// of the entry's (last) change in the first part, so XREAD addresses
// entries by sequence without a mapping, and the entry's tag in the second. The version key holds
// "<tag>:<seq>" of the last entry; it is written by the same script, so a
// snapshot reads it consistently. A store.Version is (seq, tag).
//
// Tags chain the entries: an entry's tag is the first 52 bits of SHA-1 over
// the previous entry's tag and its own value; the first entry's "previous
// tag" is a random 52-bit number the client passes to every logging script,
// which uses it only when the group has no log yet (or the log's keys hold
// something this store did not write), so the scripts stay deterministic.
// A reader checks every entry it reads against its own last tag, so it
// never continues into another history of the group, whatever happened to
// the log meanwhile:
//
//   - the group was deleted and written again, even up to and beyond the
//     reader's sequence: the new history starts from another random tag;
//   - Redis failed over to a replica that had not received the latest
//     entries, and the new primary wrote others at the same sequence numbers
//     (the generation of a log would not change then; the chain does): the
//     first entry after the reader's differs from the one it would follow;
//   - the stream was trimmed past the reader: the sequence has a gap.
//
// Each of these is ErrVersionGone, and the reader takes a new snapshot. A
// blocking XREAD that returns entries of another history is told apart by
// the same check, without another round trip.
//
// Each entry has a field "e" (short field names for the whole stream:
// entries with the master entry's fields store only their values), and a
// field "t": the writing script's TIME in microseconds since the Unix epoch,
// the store.Change.At of each of the entry's changes. An entry written by
// an older herd has no "t" (its changes' At is zero); such a herd reads
// "e" only, so it reads the entries of a newer one as before. The tags
// chain "e" alone. An
// entry of one change has as value a kind letter and the change's values
// separated by "\n" (ids contain no control characters):
//
//	O\n<session>\n<weight>:<member>       SessionOpened
//	X\n<session>                          SessionClosed
//	E\n<session>                          SessionExpired
//	C\n<partition>\n<session>\n<epoch>\n<member>   Claimed
//	R\n<partition>\n<session>\n<epoch>[\n<giver>]   Released (by GiveBack: with the giving session)
//	T\n<partition>\n<epoch>               Restored
//	P(\n<partition>\n<weight>)*           PartitionsSet (the whole set)
//	Q\n<action>\n<partition>\n<member>     Requested (request.go)
//	L\n<session>(\n<partition>\n<load>)+   LoadsReported (loads.go)
//
// A script that makes several changes (a batch of claims or releases, the
// sessions a call found expired) writes them as entries of up to maxGroup
// changes each, whose value is "M" and the changes' values, each after a
// record separator (0x1e, which no id contains):
//
//	M(\x1e<change>)+
//
// Such an entry's id is the sequence of its last change: it holds the
// changes from seq-n+1 to seq, and change i's version is (seq-n+1+i, the
// entry's tag). One entry per change cost the server an XADD and a SHA-1
// per change and every reader a stream entry per change; a first placement
// of 100,000 partitions read by 16 members was 1.6 million entries read.
// A partition set is always an entry of its own.
//
// The stream is trimmed with XADD MINID ~ <seq - limit>: approximately,
// which costs nothing per entry (Redis drops whole nodes of 100 entries),
// and keeps at least the last limit changes.

// maxGroup is the most changes one entry of the log holds; maxGroupLua is
// the same number for the scripts (TestMaxGroupLua checks they agree).
// Changes reads max/maxGroup entries at a time (at least one), so that one
// read returns at most about max changes.
const (
	maxGroup    = 100
	maxGroupLua = "100"
)

// DefaultLogLimit is how many changes of a group's log the store keeps at
// least by default: a whole first placement of 100,000 partitions (one
// Claimed change each), so that a member lagging behind it need not read a
// new snapshot. See BenchmarkLogBytesPerEntry for the bytes a change costs.
const DefaultLogLimit = 100_000

// defaultChangesBlock is the longest one Changes call blocks in XREAD
// where the store can end a wait its caller gives up (CLIENT UNBLOCK,
// logwait.go): a call that waited that long returns no entries and the
// caller calls again, so a reader at rest costs one call (three commands:
// the check script, CLIENT ID, the XREAD) per 5 minutes, 0.0033 calls per
// second, as on etcd. A wait is a connection without traffic: a server
// host that dies or a network cut during one is noticed within 2 minutes
// by TCP keep-alive (dial.go, for the connections Open dials), as the
// 2-minute waits noticed it at their read deadline (2 min 10 s); a server
// process that stops answering at the wait's read deadline (the block
// plus go-redis' 10 s). A member notices either sooner by its renewals.
const defaultChangesBlock = 5 * time.Minute

// pooledChangesBlock is the longest wait where the store cannot end it
// (a user without CLIENT UNBLOCK, a client given to New of another kind
// than *redis.Client and *redis.ClusterClient): a wait given up keeps a
// connection of the pool until the block ends. A reader gives up a wait
// when it reads the group anew, after a lost session for one, so a member
// that lost its session every TTL (10 s) would hold 12 connections of its
// pool (10 per CPU) at 2 minutes: two calls per 2 minutes, 0.017/s.
const pooledChangesBlock = 2 * time.Minute

// expireBatch is how many sessions one ExpireSessions script expires at
// most; ExpireSessions repeats it until fewer were due.
const expireBatch = 1000

type logConfig struct {
	limit int           // WithLogLimit; 0: DefaultLogLimit
	block time.Duration // 0: defaultChangesBlock or pooledChangesBlock (tests shorten it)
}

// WithLogLimit sets how many changes of each group's log the store keeps at
// least (default DefaultLogLimit; Redis's approximate trimming keeps up to
// about 100 entries more). A reader further behind gets store.ErrVersionGone and
// reads a new snapshot. n < 1 is read as 1.
func WithLogLimit(n int) Option {
	return func(c *config) { c.log.limit = max(n, 1) }
}

func (s *Store) logLimit() int {
	if s.log.limit > 0 {
		return s.log.limit
	}
	return DefaultLogLimit
}

// logArgs appends what every logging script takes after its own arguments
// (see logPrelude): the log and version keys, a random first tag for a new
// history (52 bits: exact in a Lua number) and the log's bound.
func (s *Store) logArgs(k keys, ks []string, args ...any) ([]string, []any) {
	gen := rand.Uint64() >> 12
	for gen == 0 {
		gen = rand.Uint64() >> 12
	}
	ks = append(ks, k.log, k.version)
	args = append(args, strconv.FormatUint(gen, 10), strconv.Itoa(s.logLimit()))
	return ks, args
}

// runLogged is run for a script made with logged.
func (s *Store) runLogged(ctx context.Context, op string, sc *redis.Script, k keys, ks []string, args ...any) (string, []any, error) {
	ks, args = s.logArgs(k, ks, args...)
	return s.run(ctx, op, sc, ks, args...)
}

// micros reads a script's duration in µs; anything else is 0.
func micros(v string) time.Duration {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0
	}
	return time.Duration(n) * time.Microsecond
}

// gone is Changes' ErrVersionGone.
func gone(after store.Version, format string, args ...any) error {
	return fmt.Errorf("redisstore: Changes after %v: %s: %w", after, fmt.Sprintf(format, args...), store.ErrVersionGone)
}

// Changes implements store.Store. A small script checks that the version
// can be continued (not ahead of the log, the same tag at the same
// sequence, and the last sequence of the log); then one XREAD from the
// version's id returns the entries at once if there are some, or, the log
// ending at the version, XREAD BLOCK waits for the next for at most
// defaultChangesBlock (5 minutes; pooledChangesBlock, 2, where a wait
// cannot be unblocked) or until ctx's deadline.
// Its entries are checked for their sequence and chained tags (so a log
// trimmed, or deleted and written again, between the two commands is
// caught). A call that waited in vain returns no entries. An entry that
// does not decode (written by something else) ends the version: the reader
// reads a new snapshot and continues after it.
//
// go-redis does not interrupt a blocked XREAD when ctx is cancelled: the
// store unblocks it (logwait.go), and the call returns once it has ended;
// where it cannot, the call returns at once and the command keeps its
// connection until the block ends.
func (s *Store) Changes(ctx context.Context, group string, after store.Version, max int) ([]store.Change, store.Version, error) {
	return s.ChangesInto(ctx, group, after, max, nil)
}

// ChangesInto is Changes, decoding the entries into dst's array (from its
// start) where it has room for them: a caller that has done with the
// entries of its last call passes them back, and the next call writes
// over them instead of allocating a list. A member's feed reads 10,000
// entries per call, 1.9 MB of store.Change, fresh memory each time
// otherwise, which the first writes into fault in page by page:
// BenchmarkFollowPlacementRedis follows a placement of 99,000 claims in
// 118 bytes and 479 ns of CPU a change with it, 291 and 628 without. The
// entries dst held beyond those returned are left as they were. dst nil
// is Changes.
func (s *Store) ChangesInto(ctx context.Context, group string, after store.Version, max int, dst []store.Change) ([]store.Change, store.Version, error) {
	if err := s.begin(ctx, "Changes", store.ValidateChanges(group, max)); err != nil {
		return nil, after, err
	}
	k := s.keys(group)
	res, err := s.eval(ctx, changesScript, []string{k.version},
		strconv.FormatUint(after.Tag, 10), strconv.FormatUint(after.Seq, 10))
	if err != nil {
		return nil, after, fail("Changes", err)
	}
	idle := true // the log ends at after: the read waits
	switch str(res, 0) {
	case "gone":
		return nil, after, gone(after, "%s", str(res, 1))
	case "nolog":
		if after != (store.Version{}) {
			return nil, after, gone(after, "the group has no log")
		}
	case "ok":
		idle = str(res, 1) == strconv.FormatUint(after.Seq, 10)
	default:
		return nil, after, unexpected("Changes", str(res, 0))
	}
	return s.waitChanges(ctx, k, after, max, idle, dst[:0])
}

// waitChanges blocks in XREAD for the entries after after. It returns
// fewer than limit changes only when the log held no more: one read of
// entriesFor(limit) entries may hold fewer changes (entries of one change
// each), and then the next entries are read at once, without blocking, until
// limit changes or the end of the log. Only an idle log (the check found
// it ending at after) is waited on: otherwise its entries are there, and a
// read that finds none finds a log removed meanwhile (ErrVersionGone).
func (s *Store) waitChanges(ctx context.Context, k keys, after store.Version, limit int, idle bool, dst []store.Change) ([]store.Change, store.Version, error) {
	var node *redis.Client // where a wait can be unblocked
	if idle {
		node = s.waitNode(ctx, k.log)
	}
	block := s.log.block
	switch {
	case !idle:
		block = -1
	case block > 0:
	case node != nil:
		block = defaultChangesBlock
	default:
		block = pooledChangesBlock
	}
	block = blockBefore(ctx, block)
	// The entries of every read are decoded together once the reads are
	// done, into a list of the size they need: a list grown read by read
	// was allocated and copied twice whenever a first read of full entries
	// brought fewer than limit changes (a placement's log, where every
	// ClaimBatch ends in a short entry): 587 bytes per change where 280
	// do, in BenchmarkFleetReadLog/members=16.
	var msgs []redis.XMessage
	v, n := after, 0 // the last entry read, and the changes after after read
	perEntry := 0    // the changes per entry of the last read (0: none yet)
	for {
		count := entriesFor(limit - n)
		if perEntry > 0 {
			// Ask for about the entries the rest needs at the last
			// read's changes per entry, not for entriesFor's worth of
			// full entries beyond it (their changes are read again by
			// the next call): 345 bytes per change against 281 in
			// BenchmarkFleetReadLog/members=16. A read of lone entries
			// after full ones asks for as many as the rest at once.
			count = min(count, (limit-n)/perEntry+1)
		}
		read, err := s.readLog(ctx, node, k, after, v, count, block)
		if err != nil {
			// Not what was read so far: fewer than limit changes would
			// say that the log ends there. The next call reads them again.
			return nil, after, err
		}
		msgs = append(msgs, read...)
		if len(read) < count {
			break
		}
		last, ok := parseEntryID(read[len(read)-1].ID)
		got := changesAfter(read, v.Seq) // v: where this read began
		if n += got; !ok || n >= limit {
			break // a malformed id: decodeEntries says so
		}
		v, perEntry = last, max(1, got/len(read))
		block = -1 // the rest is there already
	}
	if len(msgs) == 0 && !idle {
		return nil, after, gone(after, "the log has no entry after it, though the version is ahead")
	}
	if len(msgs) == 0 {
		return nil, after, nil
	}
	out, v, err := decodeEntries(dst, after, msgs, limit)
	if err != nil {
		return nil, after, err
	}
	return out, v, nil
}

// readLog is one XREAD of at most count entries after v, blocking up to
// block (no blocking if block < 0), for a call of Changes after after. A
// blocking read runs on a connection of node's of its own, which a call
// given up unblocks (logwait.go); without node, where the server refuses
// the unblock, or where node no longer serves the slot, through the
// store's client for at most pooledChangesBlock.
func (s *Store) readLog(ctx context.Context, node *redis.Client, k keys, after, v store.Version, count int, block time.Duration) ([]redis.XMessage, error) {
	args := &redis.XReadArgs{
		Streams: []string{k.log, strconv.FormatUint(v.Seq, 10) + "-" + strconv.FormatUint(v.Tag, 10)},
		Count:   int64(count),
		Block:   block,
	}
	var r waitReply
	if block > 0 && node != nil {
		r.xs, r.err = s.xreadUnblockable(ctx, node, args)
		if !errors.Is(r.err, errNoUnblock) && !redirect(r.err) {
			return readReply(after, r)
		}
		// The refused CLIENT ID took a round trip of the time left.
		args.Block = blockBefore(ctx, min(block, pooledChangesBlock))
	}
	ch := make(chan waitReply, 1)
	go func() {
		xs, err := s.client.XRead(ctx, args).Result()
		ch <- waitReply{xs, err}
	}()
	select {
	case r = <-ch:
	case <-ctx.Done():
		return nil, fail("Changes", ctx.Err())
	}
	return readReply(after, r)
}

// blockBefore is how long an XREAD sent now may block for at most block
// (<= 0: not at all), ending 100 ms before ctx's deadline to leave time
// for its reply: -1 (XREAD without BLOCK, which reads what is there) when
// less than a millisecond is left.
func blockBefore(ctx context.Context, block time.Duration) time.Duration {
	if d, ok := ctx.Deadline(); ok && block > 0 {
		block = min(block, time.Until(d)-100*time.Millisecond)
	}
	if block < time.Millisecond {
		return -1
	}
	return block
}

// readReply is readLog's answer for the reply r of its XREAD.
func readReply(after store.Version, r waitReply) ([]redis.XMessage, error) {
	switch {
	case errors.Is(r.err, redis.Nil):
		return nil, nil
	case r.err != nil:
		var rerr redis.Error
		if errors.As(r.err, &rerr) && strings.HasPrefix(rerr.Error(), "WRONGTYPE") {
			return nil, gone(after, "the log key holds something else")
		}
		return nil, fail("Changes", r.err)
	case len(r.xs) == 0:
		return nil, nil
	}
	return r.xs[0].Messages, nil
}

// entriesFor is how many entries of the log one read asks for, to return
// max changes: enough if every entry holds maxGroup changes, and at least
// min(max, maxGroup), so that a log of lone changes is read as many at a
// time (the changes read beyond max are read again by the next call).
func entriesFor(limit int) int {
	return max((limit+maxGroup-1)/maxGroup, min(limit, maxGroup))
}
