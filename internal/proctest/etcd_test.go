package proctest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/herdhq/herd/internal/etcdtest"
	"github.com/herdhq/herd/store/etcdstore"
)

func TestMain(m *testing.M) { etcdtest.Main(m) }

// The etcd fleet: 4 processes, 64 partitions, a checkpoint every second
// per partition, the same 2s TTL. Every checkpoint is a read and a Raft
// write with its fsync; with TestProcesses' 256 partitions at its interval,
// under the race detector with cmd/herd's etcd tests beside it (go test
// -race -run Etcd ./cmd/herd ./internal/proctest), the takeover after a
// kill -9 took longer than TTL + 1 s: this tests fencing and takeover,
// not etcd's throughput (docs/etcd.md says what it costs).
const (
	etcdPartitions = 64
	etcdInterval   = time.Second
)

// TestProcessesEtcd runs the kill -9, cut and SIGSTOP tests of
// TestProcesses on members sharing an etcd key prefix (the etcd:// store),
// with the same assertions.
func TestProcessesEtcd(t *testing.T) {
	if os.Getenv(envChild) == "1" {
		t.Skip("in a child process")
	}
	if testing.Short() {
		t.Skip("starts OS processes and takes about 30s; skipped with -short")
	}
	u := etcdtest.Need(t)
	t.Run("kill9", func(t *testing.T) {
		f, members, _ := startEtcdFleet(t, u, "kill9", nil)
		checkKill9(t, f, members)
	})
	t.Run("cut", func(t *testing.T) {
		target, _, _ := strings.Cut(strings.TrimPrefix(u, "etcd://"), "?")
		proxies := map[string]*proxy{}
		f, members, _ := startEtcdFleet(t, u, "cut", func(m string) string {
			p := newProxy(t, target)
			proxies[m] = p
			return "etcd://" + p.Addr()
		})
		checkCut(t, f, members, proxies)
	})
	t.Run("sigstop", func(t *testing.T) {
		f, members, st := startEtcdFleet(t, u, "sigstop", nil)
		checkSigstop(t, f, members, st)
	})
}

// startEtcdFleet starts the children on a key prefix of the test's own
// (deleted at the end), each on the server at u or at the address addrFor
// gives it, and waits until they share the partitions evenly.
func startEtcdFleet(t *testing.T, u, name string, addrFor func(member string) string) (*fleet, []string, *etcdstore.Store) {
	t.Helper()
	prefix := fmt.Sprintf("herdtest-proc/%016x/", rand.Uint64())
	etcdtest.Cleanup(t, u, prefix)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := etcdstore.Open(ctx, u+"?prefix="+prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	f := newFleet(t, "proctest-etcd-"+name, "", etcdPartitions, ttl)
	f.interval = etcdInterval
	var members []string
	for i := range nChildren {
		members = append(members, fmt.Sprintf("c%d", i))
	}
	for _, m := range members {
		base := u
		if addrFor != nil {
			base = addrFor(m)
		}
		f.start(m, base+"?prefix="+prefix)
	}
	d := f.waitBalanced("the fleet to spread the partitions", members, 0, 30*time.Second)
	t.Logf("%d processes share %d partitions evenly %v after starting", nChildren, etcdPartitions, d.Round(time.Millisecond))
	return f, members, st
}
