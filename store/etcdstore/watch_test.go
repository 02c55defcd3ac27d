package etcdstore

import (
	"context"
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

// watchedStore is countedStore that also counts the watch streams its
// client opens.
func watchedStore(t *testing.T, prefix string) (s *Store, calls, streams *atomic.Int64) {
	t.Helper()
	return gatedStore(t, prefix, nil)
}

// gatedStore is watchedStore whose watch streams open only once gate is
// closed (nil: at once).
func gatedStore(t *testing.T, prefix string, gate chan struct{}) (s *Store, calls, streams *atomic.Int64) {
	t.Helper()
	calls, streams = &atomic.Int64{}, &atomic.Int64{}
	unary := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		calls.Add(1)
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	stream := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		if strings.HasSuffix(method, "/Watch") {
			streams.Add(1)
			if gate != nil {
				select {
				case <-gate:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
		}
		return streamer(ctx, desc, cc, method, opts...)
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + strings.TrimPrefix(etcdtest.Need(t), "etcd://")},
		DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(unary), grpc.WithChainStreamInterceptor(stream)}})
	if err != nil {
		t.Fatal(err)
	}
	s = New(c, WithPrefix(prefix))
	t.Cleanup(func() {
		_ = s.Close()
		_ = c.Close()
	})
	return s, calls, streams
}

// TestReaderWaitsOnOneWatch: a reader following the log waits on one
// watch stream however many entries it waits for; a reader the store's
// last read left at the log's head waits without reading once the watch
// is made, and a sequencing of entries it has read does not wake it.
func TestReaderWaitsOnOneWatch(t *testing.T) {
	w, prefix := openTest(t)
	r, calls, streams := watchedStore(t, prefix)
	ctx := t.Context()
	const group = "onewatch"
	sess, err := w.OpenSession(ctx, group, "m", 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := r.Snapshot(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	v := snap.Version
	for i := range 10 {
		before := calls.Load()
		if cs := atRest(t, r, group, v); len(cs) != 0 {
			t.Fatalf("Changes at the head: %+v", cs)
		}
		// The first wait makes the watch, and reads while it is made.
		if n := calls.Load() - before; n != 0 && i > 0 {
			t.Errorf("wait %d: a reader at the head made %d calls to etcd while nothing was written; want 0", i, n)
		}
		if i%2 == 0 { // an entry left pending, read, then sequenced
			g := w.groupKey(group)
			wr := &write{g: g, group: group, later: &pendingKeys{}}
			wr.put(g+"r/p", mustJSON(record{Epoch: uint64(i + 1), Since: now().UnixMicro()}))
			wr.append(store.Change{Kind: store.Restored, Partition: "p", Epoch: uint64(i + 1)})
			if ok, err := w.commit(ctx, wr); !ok || err != nil {
				t.Fatalf("commit: %v, %v", ok, err)
			}
		} else if _, err := store.Claim(ctx, w, group, "q", sess); err != nil {
			t.Fatal(err)
		}
		cs := mustChanges(t, r, group, v)
		v = cs[len(cs)-1].Version
		if i%2 == 0 {
			w.sequence(ctx, w.groupKey(group), nil, nil, 0)
			before := calls.Load()
			if cs := atRest(t, r, group, v); len(cs) != 0 {
				t.Fatalf("Changes after a sequencing of what the reader read: %+v", cs)
			}
			if n := calls.Load() - before; n != 0 {
				t.Errorf("wait %d: a sequencing of entries the reader read woke it: %d calls to etcd; want 0", i, n)
			}
		}
	}
	if n := streams.Load(); n != 1 {
		t.Errorf("the reader opened %d watch streams; want 1", n)
	}
}

// TestIdleWatchEnds: a group's watch ends once no reader waited on it for
// the store's watchIdle, and the next reader makes a new one.
func TestIdleWatchEnds(t *testing.T) {
	w, prefix := openTest(t)
	r, _, _ := watchedStore(t, prefix)
	r.watchIdle = 10 * time.Millisecond
	ctx := t.Context()
	const group = "idlewatch"
	if _, err := w.OpenSession(ctx, group, "m", 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	snap, err := r.Snapshot(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	var first *logWatch
	for round := range 2 {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		cs, _, err := r.Changes(cctx, group, snap.Version, 100)
		cancel()
		if err != nil || len(cs) != 0 {
			t.Fatalf("Changes at the head: %+v, %v", cs, err)
		}
		r.watches.mu.Lock()
		wt := r.watches.m[r.groupKey(group)]
		r.watches.mu.Unlock()
		if wt == nil || wt == first {
			t.Fatalf("round %d: no new watch of the group after a wait", round)
		}
		first = wt
		timeout := time.After(10 * time.Second)
		for {
			wt.mu.Lock()
			ended, wake := wt.err != nil, wt.wake
			wt.mu.Unlock()
			if ended {
				break
			}
			select {
			case <-wake: // closed at each event, and when the watch ends
			case <-timeout:
				t.Fatalf("round %d: the watch did not end 10 s after its reader left", round)
			}
		}
		r.watches.mu.Lock()
		left := len(r.watches.m)
		r.watches.mu.Unlock()
		if left != 0 {
			t.Errorf("round %d: %d watches kept after they ended", round, left)
		}
	}
}

// TestChangesReadsBeforeTheWatch: a reader gets the entries the log holds
// while the group's watch is still being made, and waits once it is.
func TestChangesReadsBeforeTheWatch(t *testing.T) {
	w, prefix := openTest(t)
	gate := make(chan struct{})
	r, _, _ := gatedStore(t, prefix, gate)
	ctx := t.Context()
	const group = "beforewatch"
	if _, err := w.OpenSession(ctx, group, "m", 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	snap, err := r.Snapshot(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.OpenSession(ctx, group, "n", 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	cs, v, err := r.Changes(cctx, group, snap.Version, 100)
	cancel()
	if err != nil || len(cs) != 1 || cs[0].Kind != store.SessionOpened {
		t.Fatalf("Changes while the watch is not made: %+v, %v; want the session opened", cs, err)
	}
	close(gate)
	got := make(chan []store.Change, 1)
	go func() {
		cs, _, err := r.Changes(ctx, group, v, 100)
		if err != nil {
			t.Error(err)
		}
		got <- cs
	}()
	if _, err := w.OpenSession(ctx, group, "o", 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	if cs := <-got; len(cs) != 1 || cs[0].Kind != store.SessionOpened {
		t.Fatalf("Changes once the watch is made: %+v; want the session opened", cs)
	}
}
