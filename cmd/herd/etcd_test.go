package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/herdhq/herd/internal/etcdtest"
	"github.com/herdhq/herd/store/etcdstore"
)

// etcdURL returns the test server's URL with a key prefix of the test's
// own, deleted when t ends.
func etcdURL(t *testing.T) (string, string) {
	t.Helper()
	prefix := fmt.Sprintf("herdtest-cli/%016x/", rand.Uint64())
	u := etcdtest.Need(t)
	etcdtest.Cleanup(t, u, prefix)
	return u + "?prefix=" + prefix, prefix
}

// openEtcd opens the store at u, closed when t ends.
func openEtcd(t *testing.T, u string) *etcdstore.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	st, err := etcdstore.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// herd run on etcd: TestRunE2EKill's three members, one killed.
func TestRunE2EKillEtcd(t *testing.T) {
	u, _ := etcdURL(t)
	testRunE2EKill(t, t.TempDir(), []string{"--store", u}, 2*time.Second, 3*time.Second)
}

// herd jobs on etcd: TestJobsE2EKill's three members, one killed.
func TestJobsE2EKillEtcd(t *testing.T) {
	u, _ := etcdURL(t)
	testJobsE2EKill(t, u)
}

// herd status and herd groups on etcd: TestStatusRedis's checks.
func TestStatusEtcd(t *testing.T) {
	u, _ := etcdURL(t)
	testStatusCLI(t, u, openEtcd(t, u))
}

// group delete refuses while a member is alive, deletes with --force.
func TestGroupDeleteEtcd(t *testing.T) {
	u, _ := etcdURL(t)
	st := openEtcd(t, u)
	if _, err := st.OpenSession(t.Context(), "orders", "m1", 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	_, err := execute(t, "group", "delete", "--store", u, "--group", "orders")
	if err == nil || !strings.Contains(err.Error(), "live members") || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("group delete with a live member: %v; want a refusal that mentions --force", err)
	}
	out, err := execute(t, "group", "delete", "--store", u, "--group", "orders", "--force")
	if err != nil || out != "deleted group \"orders\"\n" {
		t.Fatalf("group delete --force: %q, %v", out, err)
	}
	groups, err := st.Groups(t.Context())
	if err != nil || len(groups) != 0 {
		t.Fatalf("groups after the delete: %v, %v; want none", groups, err)
	}
}

// The fleet bench on etcd: member processes share the cluster; the
// server's CPU is etcd's own process_cpu_seconds_total.
func TestBenchFleetEtcd(t *testing.T) {
	u, _ := etcdURL(t)
	fleetBench(t, u, true)
}
