package redisstore

import (
	"bytes"
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
)

// TestRecordsOfOlderVersions: records written by a version that predates
// the time keys read with unknown times (0); a claim time noted for another
// epoch than the record's (the record was claimed since by such a version)
// is unknown too; a time that does not decode is unknown; an owners value
// that does not decode is left out, as Snapshot leaves it out.
func TestRecordsOfOlderVersions(t *testing.T) {
	s, raw := newTestStore(t)
	ctx := ctxT(t)
	const g = "older"
	k := s.keys(g)
	id, err := s.OpenSession(ctx, g, "m", 1, time.Minute)
	must(t, err, "OpenSession")
	now := serverMicros(t, raw)
	must(t, raw.HSet(ctx, k.owners,
		"old", "5:"+id+":m", // no times at all
		"reclaimed", "9::", // epochat names epoch 8
		"garbled", "7::", // times that do not decode
		"bad", "not a record",
	).Err(), "HSET owners")
	must(t, raw.HSet(ctx, k.checkpoints, "old", "cp", "reclaimed", "x", "garbled", "y", "bad", "z").Err(), "HSET checkpoints")
	must(t, raw.HSet(ctx, k.epochat, "reclaimed", "8:"+itoa(now-1_000_000), "garbled", "7:soon").Err(), "HSET epochat")
	must(t, raw.HSet(ctx, k.ckptat, "reclaimed", itoa(now-2_000_000), "garbled", "-5").Err(), "HSET ckptat")

	rs, err := s.Records(ctx, g, []string{"bad", "old", "reclaimed", "garbled"})
	must(t, err, "Records")
	if len(rs) != 3 {
		t.Fatalf("Records returned %d records %+v; want 3 (the undecodable one left out)", len(rs), rs)
	}
	want := []struct {
		p     string
		epoch uint64
		cp    string
	}{{"old", 5, "cp"}, {"reclaimed", 9, "x"}, {"garbled", 7, "y"}}
	for i, w := range want {
		r := rs[i]
		if r.Partition != w.p || r.Epoch != w.epoch || string(r.Checkpoint) != w.cp {
			t.Fatalf("record %d: %+v; want partition %q at epoch %d with checkpoint %q", i, r, w.p, w.epoch, w.cp)
		}
		if r.Since != 0 {
			t.Fatalf("record %q: Since %v; want 0 (unknown)", w.p, r.Since)
		}
	}
	if rs[0].CheckpointAge != 0 || rs[2].CheckpointAge != 0 {
		t.Fatalf("checkpoint ages %v and %v of records without a decodable time; want 0", rs[0].CheckpointAge, rs[2].CheckpointAge)
	}
	// The checkpoint time has no epoch: it is the last write's, whoever made it.
	if age := rs[1].CheckpointAge; age < 2*time.Second || age > 10*time.Second {
		t.Fatalf("checkpoint age of a checkpoint written 2 s ago is %v; want about 2 s", age)
	}
	if rs[0].Session != id || rs[0].Member != "m" {
		t.Fatalf("record of old: %+v; want owned by %q of member m", rs[0], id)
	}

	// Records reads only: it neither expires sessions nor writes the log.
	before, err := s.Snapshot(ctx, g)
	must(t, err, "Snapshot")
	wantMalformed(t, before, store.MalformedOwnership, "bad", k.owners)
	_, err = s.Records(ctx, g, []string{"old"})
	must(t, err, "Records")
	after, err := s.Snapshot(ctx, g)
	must(t, err, "Snapshot")
	if before.Version != after.Version {
		t.Fatalf("version moved from %v to %v across Records", before.Version, after.Version)
	}
}

func itoa(us uint64) string { return strconv.FormatUint(us, 10) }

// BenchmarkRecords reads the records of MaxBatch partitions, each owned
// with a checkpoint of 100 bytes, in one Records call: what herd status
// pays per batch.
//
//	go test -run '^$' -bench Records -benchtime 200x ./store/redisstore/
func BenchmarkRecords(b *testing.B) {
	s, _ := newTestStore(b)
	ctx := context.Background()
	const g = "bench"
	id, err := s.OpenSession(ctx, g, "m", 1, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	ps := make([]string, store.MaxBatch)
	for i := range ps {
		ps[i] = strconv.Itoa(i)
	}
	rs, err := s.ClaimBatch(ctx, g, id, ps)
	if err != nil {
		b.Fatal(err)
	}
	cp := bytes.Repeat([]byte{'c'}, 100)
	for _, r := range rs {
		if err := s.Checkpoint(ctx, g, r.Ownership.Partition, r.Ownership.Epoch, cp); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		got, err := s.Records(ctx, g, ps)
		if err != nil || len(got) != len(ps) {
			b.Fatalf("Records: %d records, %v", len(got), err)
		}
	}
}
