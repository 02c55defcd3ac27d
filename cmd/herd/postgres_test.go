package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/herdhq/herd/internal/pgtest"
	"github.com/herdhq/herd/store/pgstore"
)

// pgURL returns the test server's URL with a schema of the test's own,
// dropped when t ends.
func pgURL(t *testing.T) (string, string) {
	t.Helper()
	pgtest.Need(t)
	schema := pgtest.Schema(t)
	return pgtest.WithOptions(pgtest.URL(), "schema", schema), schema
}

// noRows fails the test if any row of a group is left in schema.
func noRows(t *testing.T, schema string) {
	t.Helper()
	for _, table := range []string{"groups", "sessions", "partitions", "owners", "log"} {
		if n := pgtest.Count(t, `SELECT count(*) FROM "`+schema+`".`+table); n > 0 {
			t.Errorf("%d rows left in %s.%s; want none", n, schema, table)
		}
	}
}

// The PostgreSQL tests of the demo and the bench use a TTL of a second: a
// member's first call on a new connection compiles the store's functions
// (pgstore's warm.go), and under .ci/run's load that took more than 180 ms,
// all that Join gives the first session with a TTL of 200 ms.
func TestDemoPostgresLeavesNoRow(t *testing.T) {
	u, schema := pgURL(t)
	var out bytes.Buffer
	if err := runDemo(t.Context(), &out, demoOpts{storeURL: u, partitions: 32, ttl: time.Second}); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	noRows(t, schema)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	w := &cancelWriter{after: "step 1:", cancel: cancel}
	err := runDemo(ctx, w, demoOpts{storeURL: u, partitions: 32, ttl: 2 * time.Second})
	if !errors.Is(err, context.Canceled) || strings.Contains(err.Error(), "did not leave") || strings.Contains(err.Error(), "deleting") {
		t.Fatalf("interrupted demo: %v; want only context.Canceled\n%s", err, w.String())
	}
	noRows(t, schema)
}

func TestBenchPostgres(t *testing.T) {
	u, schema := pgURL(t)
	benchJSON(t, u, time.Second)
	noRows(t, schema)
}

// group delete refuses while a member is alive, deletes with --force, and
// leaves no row.
func TestGroupDeletePostgres(t *testing.T) {
	u, schema := pgURL(t)
	st := openPG(t, u)
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
	noRows(t, schema)
}

// herd run on PostgreSQL: TestRunE2EKill's three members, one killed, on a
// schema of the test's own.
func TestRunE2EKillPostgres(t *testing.T) {
	u, _ := pgURL(t)
	testRunE2EKill(t, t.TempDir(), []string{"--store", u}, 2*time.Second, 3*time.Second)
}

// herd jobs on PostgreSQL: TestJobsE2EKill's three members, one killed.
func TestJobsE2EKillPostgres(t *testing.T) {
	u, _ := pgURL(t)
	testJobsE2EKill(t, u)
}

// herd status and herd groups on PostgreSQL, through the command line:
// TestStatusRedis's checks, and no row left.
func TestStatusPostgres(t *testing.T) {
	u, schema := pgURL(t)
	testStatusCLI(t, u, openPG(t, u))
	noRows(t, schema)
}

// openPG opens the store at u, closed when t ends.
func openPG(t *testing.T, u string) *pgstore.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	st, err := pgstore.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// herd status and partitions show on a schema nothing was written to say
// so (exit 5) and create nothing: a role that may only read can run them.
func TestStatusPostgresNewSchemaCreatesNothing(t *testing.T) {
	u, schema := pgURL(t)
	for _, args := range [][]string{{"status", "--store", u}, {"partitions", "show", "--store", u, "--group", "g"}} {
		_, err := execute(t, args...)
		if exitCode(err) != exitNotFound || !strings.Contains(err.Error(), schema) {
			t.Errorf("herd %v on a new schema: %v (exit %d); want exit %d naming the schema", args[:2], err, exitCode(err), exitNotFound)
		}
	}
	if n := pgtest.Count(t, "SELECT count(*) FROM pg_namespace WHERE nspname = $1", schema); n != 0 {
		t.Fatalf("herd status created schema %q", schema)
	}
}
