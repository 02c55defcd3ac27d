package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/herdhq/herd/internal/etcdtest"
	"github.com/herdhq/herd/store"
)

// countedStore is a store on a client of the test server of its own whose
// calls to etcd (unary ones: reads and writes, not watches) are counted in
// calls, under prefix.
func countedStore(t *testing.T, prefix string) (*Store, *atomic.Int64) {
	t.Helper()
	var calls atomic.Int64
	count := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		calls.Add(1)
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + strings.TrimPrefix(etcdtest.Need(t), "etcd://")},
		DialTimeout: 5 * time.Second, Logger: zap.NewNop(), DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(count)}})
	if err != nil {
		t.Fatal(err)
	}
	s := New(c, WithPrefix(prefix))
	t.Cleanup(func() {
		_ = s.Close()
		_ = c.Close()
	})
	return s, &calls
}

// TestChangesOneCall: a snapshot with no session to expire is one read
// and one call per live session, and a reader at the end of the log reads
// what a write appends, sequenced at once or pending, and what a
// sequencing moves, in one call to etcd each.
func TestChangesOneCall(t *testing.T) {
	w, prefix := openTest(t)
	r, calls := countedStore(t, prefix)
	ctx := t.Context()
	const group = "onecall"
	sess, err := w.OpenSession(ctx, group, "m", 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	before := calls.Load()
	snap, err := r.Snapshot(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if n := calls.Load() - before; n != 2 {
		t.Errorf("Snapshot of a group of one live session made %d calls to etcd; want 2 (its read, the session's lease)", n)
	}
	v := snap.Version
	read := func(what string, want store.ChangeKind) {
		t.Helper()
		cs := atRest(t, r, group, v) // the reader's first call after a read of the group
		if len(cs) != 0 {
			v = cs[len(cs)-1].Version
		}
		if what == "" {
			return
		}
		if err := w.sequenced(ctx); err != nil {
			t.Fatal(err)
		}
		g := w.groupKey(group)
		switch want {
		case store.Restored: // left pending
			wr := &write{g: g, group: group, later: &pendingKeys{}}
			wr.put(g+"r/p", mustJSON(record{Epoch: 5, Since: now().UnixMicro()}))
			wr.append(store.Change{Kind: store.Restored, Partition: "p", Epoch: 5})
			if ok, err := w.commit(ctx, wr); !ok || err != nil {
				t.Fatalf("commit: %v, %v", ok, err)
			}
		case store.Claimed: // sequences the pending entry, then logged at once
			if _, err := store.Claim(ctx, w, group, "q", sess); err != nil {
				t.Fatal(err)
			}
			if err := w.sequenced(ctx); err != nil {
				t.Fatal(err)
			}
		}
		before := calls.Load()
		cs = mustChanges(t, r, group, v)
		if n := calls.Load() - before; n != 1 || len(cs) == 0 || cs[len(cs)-1].Kind != want {
			t.Errorf("%s: Changes made %d calls to etcd and returned %+v; want 1 call and the %v entry last", what, n, cs, want)
		}
		if len(cs) != 0 {
			v = cs[len(cs)-1].Version
		}
	}
	read("", 0)
	read("an entry left pending", store.Restored)
	read("a claim after it", store.Claimed)
	read("another entry left pending", store.Restored)
	read("a claim after it", store.Claimed)
}

// TestChangesAnotherHistory: a reader whose version the store's last read
// of the log checked finds it gone when the group is deleted and written
// anew past it, though the new history's entries after it start a key.
func TestChangesAnotherHistory(t *testing.T) {
	w, prefix := openTest(t)
	r, _ := countedStore(t, prefix)
	ctx := t.Context()
	const group = "history"
	open := func(n int) {
		t.Helper()
		for i := range n {
			if _, err := w.OpenSession(ctx, group, fmt.Sprint("m", i), 1, time.Minute); err != nil {
				t.Fatal(err)
			}
			if err := w.sequenced(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	open(3)
	snap, err := r.Snapshot(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if cs := atRest(t, r, group, snap.Version); len(cs) != 0 { // the store's hint: the reader at the end
		t.Fatalf("Changes at the end: %+v", cs)
	}
	if err := w.DeleteGroup(ctx, group, true); err != nil {
		t.Fatal(err)
	}
	open(int(snap.Version.Seq) + 2) // one entry a key: the key after the reader's seq starts after it
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cs, _, err := r.Changes(cctx, group, snap.Version, 100)
	if !errors.Is(err, store.ErrVersionGone) {
		t.Fatalf("Changes after %v of the old history: %+v, %v; want ErrVersionGone", snap.Version, cs, err)
	}
}

// atRest calls Changes after v for at most 100 ms: it returns what the log
// holds after v, if anything, else nothing when the deadline comes.
func atRest(t *testing.T, s *Store, group string, v store.Version) []store.Change {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	cs, _, err := s.Changes(ctx, group, v, 100)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}
