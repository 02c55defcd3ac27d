package storetest

// The log's calls: blocking, a full log, expiry entries, batches of claims and releases, trimming.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
)

// testLogBlocks: Changes at the end of the log blocks until an entry is
// appended (or returns nothing, which a backend may do), returns promptly
// when its context is cancelled, and returns nothing and no error when its
// deadline comes.
func testLogBlocks(e *env) {
	t := e.t
	e.open("m", longTTL)
	v := e.snap().Version
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	began := time.Now()
	if _, _, err := e.s.Changes(ctx, e.group, v, 10); err == nil {
		t.Fatal("Changes with a cancelled context returned no error")
	}
	if d := time.Since(began); d > promptly {
		t.Fatalf("Changes with a cancelled context took %v", d)
	}
	// At rest until its deadline: no entries and no error. An error says
	// that the store did not answer in time, which a loaded machine may
	// make happen now and then: one call in three must answer.
	for try := 1; ; try++ {
		dctx, dcancel := context.WithTimeout(e.ctx, 500*time.Millisecond)
		cs, next, err := e.s.Changes(dctx, e.group, v, 10)
		dcancel()
		if len(cs) > 0 || (err == nil && next != v) {
			t.Fatalf("Changes at the end of the log until its deadline: %+v, %v, %v; want no entries and %v", cs, next, err, v)
		}
		if err == nil {
			break
		}
		if try == 3 {
			t.Fatalf("Changes at the end of the log until its deadline, three times: %v; want no entries and no error", err)
		}
	}
	got := waitingReader(e, v)
	if _, err := e.s.SetPartitions(e.ctx, e.group, store.PartitionSet{Partitions: []store.Partition{{ID: "x"}}}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if r.err != nil || len(r.cs) != 1 || r.cs[0].Kind != store.PartitionsSet || r.cs[0].Version.Seq != v.Seq+1 ||
			!slices.Equal(r.cs[0].Partitions, []store.Partition{{ID: "x"}}) {
			t.Fatalf("Changes woken by SetPartitions returned %+v, %v; want the one PartitionsSet entry %d", r.cs, r.err, v.Seq+1)
		}
	case <-time.After(eventWait):
		t.Fatalf("Changes did not return within %v of SetPartitions", eventWait)
	}
}

// testLogFull: Changes returns max entries whenever the log holds that
// many after the version asked for, whatever the writes that made them (one
// entry each or one batch of many): a call that returns fewer has read to
// the end of the log, which members rely on (store.Store.Changes).
func testLogFull(e *env) {
	t := e.t
	sess := e.open("m", longTTL)
	var ids []string
	for i := range 300 {
		ids = append(ids, fmt.Sprintf("p%03d", i))
	}
	e.setPartitions(ids...)
	v := e.snap().Version
	for _, p := range ids[:150] {
		e.claim(p, sess) // one entry each
	}
	if _, err := e.s.ClaimBatch(e.ctx, e.group, sess, ids[150:250]); err != nil {
		t.Fatal(err)
	}
	for _, p := range ids[250:] {
		e.claim(p, sess)
	}
	head := e.snap().Version
	total := int(head.Seq - v.Seq)
	if total != len(ids) {
		t.Fatalf("300 claims moved the version from %v to %v; want 300 entries", v, head)
	}
	for _, c := range []struct {
		after, max int
	}{{0, 1000}, {0, 300}, {0, 7}, {0, 120}, {0, 160}, {140, 100}, {149, 2}, {150, 100}, {160, 1000}, {240, 30}, {299, 5}} {
		from := v
		if c.after > 0 {
			cs, next, err := e.s.Changes(e.ctx, e.group, v, c.after)
			if err != nil || len(cs) != c.after {
				t.Fatalf("Changes(after %v, max %d) returned %d entries, %v; want %d", v, c.after, len(cs), err, c.after)
			}
			from = next
		}
		want := min(c.max, total-c.after)
		cs, next, err := e.s.Changes(e.ctx, e.group, from, c.max)
		if err != nil {
			t.Fatalf("Changes(after entry %d, max %d): %v", c.after, c.max, err)
		}
		checkEntries(t, from, next, cs)
		if len(cs) != want {
			t.Fatalf("Changes(after entry %d of 300, max %d) returned %d entries; want %d (fewer than max only at the end of the log)", c.after, c.max, len(cs), want)
		}
	}
}

// testLogExpiry: a session left to expire is logged as expired exactly
// once, however many calls notice it at once; ExpireSessions and KeepAlive
// report the time until the next expiry.
func testLogExpiry(e *env) {
	t := e.t
	live := e.open("live", longTTL)
	next, err := e.s.KeepAlive(e.ctx, e.group, live, longTTL)
	if err != nil || next <= 0 || next > longTTL {
		t.Fatalf("KeepAlive of the only session returned next %v, %v; want in (0, %v]", next, err, longTTL)
	}
	v := e.snap().Version
	dying := e.open("dying", shortTTL)
	next, err = e.s.KeepAlive(e.ctx, e.group, live, longTTL)
	if err != nil || next <= 0 || next > shortTTL {
		t.Fatalf("KeepAlive with a session of TTL %v in the group returned next %v, %v; want in (0, %v]", shortTTL, next, err, shortTTL)
	}
	next, err = e.s.ExpireSessions(e.ctx, e.group)
	if err != nil || next <= 0 || next > shortTTL {
		t.Fatalf("ExpireSessions before any TTL passed returned next %v, %v; want in (0, %v]", next, err, shortTTL)
	}
	select {
	case <-time.After(shortTTL + e.opts.ExpiryLag + 50*time.Millisecond):
	case <-e.ctx.Done():
		t.Fatal(e.ctx.Err())
	}
	// Every call that may notice the expiry, at once.
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			var err error
			switch i % 4 {
			case 0:
				_, err = e.s.ExpireSessions(e.ctx, e.group)
			case 1:
				err = keepErr(e.s.KeepAlive(e.ctx, e.group, live, longTTL))
			case 2:
				_, err = e.s.Snapshot(e.ctx, e.group)
			case 3:
				_, err = store.Claim(e.ctx, e.s, e.group, fmt.Sprintf("p%d", i), live)
			}
			if err != nil {
				t.Errorf("call %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	next, err = e.s.ExpireSessions(e.ctx, e.group)
	if err != nil || next <= shortTTL || next > longTTL {
		t.Fatalf("ExpireSessions with only the long session left returned next %v, %v; want in (%v, %v]", next, err, shortTTL, longTTL)
	}
	end := e.snap()
	if end.Alive(dying) {
		t.Fatalf("session %q is alive after its TTL", dying)
	}
	var expired, closed int
	for _, c := range e.readLog(v, end.Version) {
		switch {
		case c.Kind == store.SessionExpired && c.Session == dying:
			expired++
		case c.Kind == store.SessionExpired || c.Kind == store.SessionClosed:
			closed++
		}
	}
	if expired != 1 || closed != 0 {
		t.Fatalf("the log has %d SessionExpired entries for the expired session and %d other session ends; want exactly 1 and 0", expired, closed)
	}
	e.close(live)
	next, err = e.s.ExpireSessions(e.ctx, e.group)
	if err != nil || next != 0 {
		t.Fatalf("ExpireSessions with no live session returned next %v, %v; want 0", next, err)
	}
}

// testClaimBatch: ClaimBatch gives each partition what store.Claim (a
// batch of one) would, logs
// one Claimed entry per claimed partition in order, and rejects the whole
// call for a dead session, a duplicate or too many partitions.
func testClaimBatch(e *env) {
	t := e.t
	a := e.open("a", longTTL)
	b := e.open("b", longTTL)
	held := e.claim("held", b)
	mine := e.claim("mine", a)
	e.checkpoint("mine", mine.Epoch, "pos")
	v := e.snap().Version
	rs, err := e.s.ClaimBatch(e.ctx, e.group, a, []string{"new", "held", "mine"})
	if err != nil || len(rs) != 3 {
		t.Fatalf("ClaimBatch: %d results, %v; want 3 results", len(rs), err)
	}
	if rs[0].Err != nil || rs[0].Ownership.Partition != "new" || rs[0].Ownership.Session != a || rs[0].Ownership.Member != "a" || rs[0].Ownership.Epoch == 0 {
		t.Fatalf("ClaimBatch result for a free partition: %s, %v; want it claimed by %q", fmtOwner(rs[0].Ownership), rs[0].Err, a)
	}
	wantErr(t, rs[1].Err, store.ErrClaimed, "ClaimBatch result for a partition a live session holds", "as Claim")
	if rs[2].Err != nil || rs[2].Ownership.Epoch <= mine.Epoch || string(rs[2].Ownership.Checkpoint) != "pos" {
		t.Fatalf("ClaimBatch result for a partition the session holds: %s, %v; want a new epoch above %d and checkpoint \"pos\"", fmtOwner(rs[2].Ownership), rs[2].Err, mine.Epoch)
	}
	if o := e.mustRecord("held"); !sameOwner(o, held) {
		t.Fatalf("ClaimBatch changed the record of a partition another session holds: %s; want %s", fmtOwner(o), fmtOwner(held))
	}
	cs := e.readLog(v, e.snap().Version)
	if len(cs) != 2 || cs[0].Kind != store.Claimed || cs[0].Partition != "new" || cs[0].Epoch != rs[0].Ownership.Epoch ||
		cs[1].Kind != store.Claimed || cs[1].Partition != "mine" || cs[1].Epoch != rs[2].Ownership.Epoch || cs[1].Member != "a" || cs[1].Session != a {
		t.Fatalf("entries after ClaimBatch: %+v; want Claimed new and Claimed mine, with their epochs", cs)
	}
	_, err = e.s.ClaimBatch(e.ctx, e.group, a, []string{"x", "x"})
	wantErr(t, err, store.ErrInvalid, "ClaimBatch with a duplicate", "a partition is listed once")
	_, err = e.s.ClaimBatch(e.ctx, e.group, a, make([]string, store.MaxBatch+1))
	wantErr(t, err, store.ErrInvalid, "ClaimBatch of MaxBatch+1 partitions", "a batch is bounded")
	rs, err = e.s.ClaimBatch(e.ctx, e.group, a, nil)
	if err != nil || len(rs) != 0 {
		t.Fatalf("ClaimBatch of nothing: %v, %v; want no results and no error", rs, err)
	}
	e.close(a)
	_, err = e.s.ClaimBatch(e.ctx, e.group, a, []string{"new"})
	wantErr(t, err, store.ErrSessionExpired, "ClaimBatch by a closed session", "as Claim")

	// A batch of MaxBatch partitions is one call.
	c := e.open("c", longTTL)
	many := make([]string, store.MaxBatch)
	for i := range many {
		many[i] = fmt.Sprintf("q%04d", i)
	}
	rs, err = e.s.ClaimBatch(e.ctx, e.group, c, many)
	if err != nil || len(rs) != len(many) {
		t.Fatalf("ClaimBatch of %d partitions: %d results, %v", len(many), len(rs), err)
	}
	for i, r := range rs {
		if r.Err != nil || r.Ownership.Partition != many[i] {
			t.Fatalf("ClaimBatch of %d partitions: result %d is %s, %v", len(many), i, fmtOwner(r.Ownership), r.Err)
		}
	}
}

// testReleaseBatch: ReleaseBatch gives each record what store.Release would and
// logs one Released entry per release.
func testReleaseBatch(e *env) {
	t := e.t
	a := e.open("a", longTTL)
	b := e.open("b", longTTL)
	p := e.claim("p", a)
	e.checkpoint("p", p.Epoch, "kept")
	q := e.claim("q", a)
	stale := e.claim("stale", a)
	stale2 := e.claim("stale", a)
	other := e.claim("other", b)
	v := e.snap().Version
	errs, err := e.s.ReleaseBatch(e.ctx, e.group, a, []store.Ownership{
		{Partition: "p", Epoch: p.Epoch}, {Partition: "stale", Epoch: stale.Epoch},
		{Partition: "other", Epoch: other.Epoch}, {Partition: "none", Epoch: 7}, {Partition: "q", Epoch: q.Epoch},
	})
	if err != nil || len(errs) != 5 {
		t.Fatalf("ReleaseBatch: %v, %v; want 5 results", errs, err)
	}
	if errs[0] != nil || errs[4] != nil {
		t.Fatalf("ReleaseBatch of records the session holds: %v, %v; want nil", errs[0], errs[4])
	}
	for i := 1; i <= 3; i++ {
		wantErr(t, errs[i], store.ErrNotOwner, fmt.Sprintf("ReleaseBatch result %d", i), "stale epoch, another session's record, no record")
	}
	if o := e.mustRecord("p"); o.Session != "" || o.Epoch != p.Epoch {
		t.Fatalf("record after ReleaseBatch: %s; want released at epoch %d", fmtOwner(o), p.Epoch)
	}
	if o := e.mustRecord("stale"); !sameOwner(o, stale2) {
		t.Fatalf("ReleaseBatch with a stale epoch changed the record: %s", fmtOwner(o))
	}
	cs := e.readLog(v, e.snap().Version)
	if len(cs) != 2 || cs[0].Kind != store.Released || cs[0].Partition != "p" || cs[0].Epoch != p.Epoch || cs[0].Session != a ||
		cs[1].Kind != store.Released || cs[1].Partition != "q" {
		t.Fatalf("entries after ReleaseBatch: %+v; want Released p and Released q", cs)
	}
	e.wantCheckpoint("p", b, "kept", "ReleaseBatch keeps the checkpoint")
	_, err = e.s.ReleaseBatch(e.ctx, e.group, a, []store.Ownership{{Partition: "q", Epoch: 0}})
	wantErr(t, err, store.ErrInvalid, "ReleaseBatch with epoch 0", "as Release")
	_, err = e.s.ReleaseBatch(e.ctx, e.group, a, []store.Ownership{{Partition: "q", Epoch: 1}, {Partition: "q", Epoch: 2}})
	wantErr(t, err, store.ErrInvalid, "ReleaseBatch with a duplicate", "a partition is listed once")
	e.close(a)
	errs, err = e.s.ReleaseBatch(e.ctx, e.group, a, []store.Ownership{{Partition: "stale", Epoch: stale2.Epoch}})
	if err != nil || len(errs) != 1 || !errors.Is(errs[0], store.ErrNotOwner) {
		t.Fatalf("ReleaseBatch by a closed session: %v, %v; want ErrNotOwner for the record, as Release", errs, err)
	}
}

// RunTrim checks ErrVersionGone for a version whose entries were trimmed.
// s must keep at most about limit entries of a group's log (a backend's
// option; it may keep more, as Redis's approximate trimming does, by up to
// 100 entries): after 4*limit+300 changes, the first version is gone, and
// the snapshot's version can still be continued.
func RunTrim(t *testing.T, s store.Store, limit int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), subtestTimeout)
	defer cancel()
	e := &env{t: t, s: s, ctx: ctx, group: newGroup(t, "")}
	sess := e.open("m", longTTL)
	v := e.snap().Version
	for i := range 2*limit + 150 {
		o := e.claim(fmt.Sprintf("p%d", i%3), sess)
		e.release(o.Partition, sess, o.Epoch)
	}
	_, _, err := e.s.Changes(ctx, e.group, v, 10)
	wantErr(t, err, store.ErrVersionGone, fmt.Sprintf("Changes(after %v) after %d changes with a log of %d entries", v, 4*limit+300, limit), "the entries were trimmed")
	snap := e.snap()
	e.open("m2", longTTL)
	cs := e.readLog(snap.Version, e.snap().Version)
	if len(cs) != 1 || cs[0].Kind != store.SessionOpened {
		t.Fatalf("entries after the trimmed log's last snapshot: %+v; want one SessionOpened", cs)
	}
}

// changesReply is what a waiting reader's Changes call returned.
type changesReply struct {
	cs  []store.Change
	err error
}

// waitingReader starts a reader at the end of the log (after v), calling
// Changes again each time one returns nothing, and fails the test unless
// it is still waiting 100 ms later. The channel gets its first entries.
func waitingReader(e *env, v store.Version) <-chan changesReply {
	got := make(chan changesReply, 1)
	go func() {
		cur := v
		for {
			cs, next, err := e.s.Changes(e.ctx, e.group, cur, 10)
			if err != nil || len(cs) > 0 {
				got <- changesReply{cs, err}
				return
			}
			cur = next
		}
	}()
	select {
	case r := <-got:
		e.t.Fatalf("Changes at the end of the log returned %+v, %v before anything was written; want it to wait", r.cs, r.err)
	case <-time.After(100 * time.Millisecond):
	}
	return got
}
