package pgstore

import (
	"context"
	"os"
	"testing"

	"github.com/herdhq/herd/store"
)

// One read of a claim's 625 log entries (readChanges, bypassing the
// notifications) from a group of 10,000 partitions whose log holds their
// 16 claims of 625 (the fleet's first placement): every member's reader
// reads each claim once.
func BenchmarkReadLog625(b *testing.B) {
	s := openTest(b)
	group, _ := benchGroup(b, s, 10_000)
	ctx := context.Background()
	var end store.Version
	if err := s.pool.QueryRow(ctx, "SELECT seq, tag FROM "+s.qschema+".groups WHERE name = $1", group).Scan(&end.Seq, &end.Tag); err != nil {
		b.Fatal(err)
	}
	var after store.Version
	after.Seq = end.Seq - 625
	if err := s.pool.QueryRow(ctx, "SELECT l.tag FROM "+s.qschema+".log l JOIN "+s.qschema+".groups g USING (gid) WHERE g.name = $1 AND l.seq = $2",
		group, int64(after.Seq)).Scan(&after.Tag); err != nil {
		b.Fatal(err)
	}
	if os.Getenv("HERD_EXPLAIN") != "" {
		for range 7 { // past pgx's and the server's switch to a generic plan
			if _, _, err := s.readChanges(ctx, group, after, 10_000); err != nil {
				b.Fatal(err)
			}
		}
		rows, err := s.pool.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+s.q.changes, group, int64(after.Seq), int64(10_001))
		if err != nil {
			b.Fatal(err)
		}
		for rows.Next() {
			var line string
			_ = rows.Scan(&line)
			b.Log(line)
		}
		rows.Close()
	}
	b.ResetTimer()
	for b.Loop() {
		cs, _, err := s.readChanges(ctx, group, after, 10_000)
		if err != nil || len(cs) != 625 {
			b.Fatal(len(cs), err)
		}
	}
}
