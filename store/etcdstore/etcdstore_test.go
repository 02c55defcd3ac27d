package etcdstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/herdhq/herd/internal/etcdtest"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/storetest"
)

func TestMain(m *testing.M) { etcdtest.Main(m) }

// testPrefix returns a key prefix no other test or run uses, and deletes
// every key under it (and revokes nothing: sessions end with their TTL)
// when t ends.
func testPrefix(t testing.TB, c *clientv3.Client) string {
	t.Helper()
	p := fmt.Sprintf("herdtest/%016x/", rand.Uint64())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := c.Delete(ctx, p, clientv3.WithPrefix()); err != nil {
			t.Errorf("deleting the test's keys under %q: %v", p, err)
		}
	})
	return p
}

// openTest opens a store on the test server with a fresh prefix.
func openTest(t testing.TB, opts ...Option) (*Store, string) {
	t.Helper()
	u := etcdtest.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := Open(ctx, u)
	if err != nil {
		t.Fatalf("Open(%s): %v", u, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	p := testPrefix(t, s.c)
	s.prefix = p
	for _, o := range opts {
		o(s)
	}
	return s, p
}

func TestConformance(t *testing.T) {
	base, prefix := openTest(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		return New(base.c, WithPrefix(prefix))
	})
}
