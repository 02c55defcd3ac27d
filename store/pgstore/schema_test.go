package pgstore

import (
	"context"
	"errors"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/herdhq/herd/internal/pgtest"
	"github.com/herdhq/herd/store"
)

// A schema written by a newer herd is refused with a message that says
// so; one of this version is used as it is.
func TestSchemaVersionNewerRefused(t *testing.T) {
	requireServer(t)
	schema := newSchema(t)
	s := openIn(t, schema)
	s.Close()
	s = openIn(t, schema) // the same version: used as it is
	s.Close()
	admin(t, `UPDATE "`+schema+`".schema_version SET version = 99`)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := Open(ctx, withOptions(testURL(), "schema", schema))
	if err == nil {
		t.Fatal("Open of a schema at version 99: nil error; want a refusal")
	}
	if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), "version 99") || !strings.Contains(err.Error(), "newer herd") {
		t.Fatalf("Open of a schema at version 99: %v; want ErrInvalid naming the version and a newer herd", err)
	}
}

// Epochs keep increasing after the schema is dropped and created again,
// whether the same store goes on (it creates the schema again at its next
// call) or a new one is opened; versions of the dropped log are gone.
func TestEpochsAfterDropAndRecreate(t *testing.T) {
	requireServer(t)
	schema := newSchema(t)
	s := openIn(t, schema)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const group = "drop"
	sess, err := s.OpenSession(ctx, group, "m", 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var last uint64
	for range 3 {
		o, err := store.Claim(ctx, s, group, "p", sess)
		if err != nil {
			t.Fatal(err)
		}
		last = o.Epoch
	}
	snap, err := s.Snapshot(ctx, group)
	if err != nil {
		t.Fatal(err)
	}

	admin(t, `DROP SCHEMA "`+schema+`" CASCADE`)
	if _, err := s.KeepAlive(ctx, group, sess, time.Minute); !errors.Is(err, store.ErrSessionExpired) {
		t.Fatalf("KeepAlive after the schema was dropped: %v; want ErrSessionExpired (the session is gone)", err)
	}
	if _, _, err := s.Changes(ctx, group, snap.Version, 10); !errors.Is(err, store.ErrVersionGone) {
		t.Fatalf("Changes after a version of the dropped log: %v; want ErrVersionGone", err)
	}
	sess, err = s.OpenSession(ctx, group, "m", 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	o, err := store.Claim(ctx, s, group, "p", sess)
	if err != nil {
		t.Fatal(err)
	}
	if o.Epoch <= last || o.Checkpoint != nil {
		t.Fatalf("Claim after the schema was dropped: %+v; want a fresh record with an epoch above %d", o, last)
	}
	last = o.Epoch

	admin(t, `DROP SCHEMA "`+schema+`" CASCADE`)
	s2 := openIn(t, schema)
	sess2, err := s2.OpenSession(ctx, group, "m", 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	o, err = store.Claim(ctx, s2, group, "p", sess2)
	if err != nil {
		t.Fatal(err)
	}
	if o.Epoch <= last {
		t.Fatalf("Claim by a store opened after the schema was dropped again: epoch %d; want above %d", o.Epoch, last)
	}
}

// Concurrent Opens of a new schema install it once, without errors.
func TestConcurrentInstall(t *testing.T) {
	requireServer(t)
	schema := newSchema(t)
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			s, err := Open(ctx, withOptions(testURL(), "schema", schema))
			if err == nil {
				s.Close()
			}
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatalf("concurrent Open of a new schema: %v", err)
		}
	}
}

// Open refuses an unusable server with a clear error.
func TestOpenUnreachable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := Open(ctx, "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=2")
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Open of a closed port: %v; want ErrUnavailable", err)
	}
}

// The pool's connections are warmed up as they are made, with a
// transaction that leaves nothing behind.
func TestWarmUpLeavesNothing(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	// Make more connections than Open did: each is warmed up.
	conns := make([]interface{ Release() }, 0, 4)
	for range 4 {
		c, err := s.Pool().Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Release()
	}
	// The warm-ups ran: each created its group, and the identity sequence
	// keeps the values their rolled-back rows took.
	var last int64
	var called bool
	if err := s.Pool().QueryRow(ctx, "SELECT last_value, is_called FROM "+s.qschema+".groups_gid_seq").Scan(&last, &called); err != nil {
		t.Fatal(err)
	}
	if !called || last < 4 {
		t.Fatalf("the groups' id sequence is at %d (called %v) after 4 connections; want each warmed up", last, called)
	}
	for _, table := range []string{"groups", "sessions", "owners", "log"} {
		var n int
		if err := s.Pool().QueryRow(ctx, "SELECT count(*) FROM "+s.qschema+"."+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Fatalf("%d rows in %s after warm-ups; want none", n, table)
		}
	}
}

// A schema of version 1 is upgraded when a store opens it: its claim and
// release functions are replaced by those that never wait for a record's
// lock (locks.go), and the version table says 2.
func TestSchemaUpgradeFromVersion1(t *testing.T) {
	requireServer(t)
	schema := newSchema(t)
	s := openIn(t, schema)
	s.Close()
	// What version 1 had: no lock_records, and the version row.
	admin(t, `DROP FUNCTION "`+schema+`".lock_records, "`+schema+`".lock_free, "`+schema+`".end_transactions`)
	admin(t, `UPDATE "`+schema+`".schema_version SET version = 1`)
	s = openIn(t, schema)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var v int
	if err := s.Pool().QueryRow(ctx, `SELECT max(version) FROM "`+schema+`".schema_version`).Scan(&v); err != nil || v != SchemaVersion {
		t.Fatalf("schema version after the upgrade: %d, %v; want %d", v, err, SchemaVersion)
	}
	sess, err := s.OpenSession(ctx, "g", "m", 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	o, err := store.Claim(ctx, s, "g", "p", sess)
	if err != nil {
		t.Fatalf("Claim on the upgraded schema: %v", err)
	}
	if err := store.Release(ctx, s, "g", "p", sess, o.Epoch); err != nil {
		t.Fatalf("Release on the upgraded schema: %v", err)
	}
}

// A read-only open installs nothing: a schema without herd's tables is
// fs.ErrNotExist and is not created; once written, it opens and reads.
func TestReadOnlyCreatesNoSchema(t *testing.T) {
	requireServer(t)
	schema := newSchema(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := Open(ctx, withOptions(testURL(), "schema", schema), WithReadOnly())
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), schema) {
		t.Fatalf("read-only Open of a schema never written: %v; want fs.ErrNotExist naming the schema", err)
	}
	if pgtest.Count(t, "SELECT count(*) FROM pg_namespace WHERE nspname = $1", schema) != 0 {
		t.Fatalf("read-only Open created schema %q", schema)
	}
	w := openIn(t, schema)
	if _, err := w.OpenSession(ctx, "g", "m", 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	w.Close()
	r := openIn(t, schema, WithReadOnly())
	defer r.Close()
	snap, err := r.Snapshot(ctx, "g")
	if err != nil || len(snap.Sessions) != 1 {
		t.Fatalf("read-only Snapshot: %v, %d sessions; want the one written", err, len(snap.Sessions))
	}
}
