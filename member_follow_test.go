package herd

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/herdhq/herd/internal/redistest"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/redisstore"
)

// BenchmarkMemberFollowRedis is BenchmarkMemberPlacement on Redis: one
// member of 100 on 100,000 partitions joins, claims its 1,000, then
// follows the log of the other 99 members' 99,000 claims. follow-cpu-ns/op
// is this process's CPU in the second phase alone: the whole path of
// following a placement (the reads of the log and their decoding, the
// feed, applying the entries to the copy and checking them against the
// target, the plans it calls for). cpu-ns/op is both phases.
//
//	go test -run '^$' -bench MemberFollowRedis -benchtime 3x -count 5 .
func BenchmarkMemberFollowRedis(b *testing.B) {
	const members, parts = 100, 100_000
	b.StopTimer() // the timer runs in the member's phases only
	raw := redistest.Need(b)
	prefix := redistest.Prefix(b, raw, "herdbench-follow")
	st, err := redisstore.Open(context.Background(), redistest.URL(), redisstore.WithPrefix(prefix))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	ps := make([]store.Partition, parts)
	for i := range ps {
		ps[i] = store.Partition{ID: fmt.Sprintf("partition-%06d", i)}
	}
	var cpu, followCPU time.Duration
	b.ReportAllocs()
	for i := range b.N {
		g := fmt.Sprintf("bench-%d", i)
		join, follow, _ := placeOneMember(b, &heldLog{Store: st, atRest: 200 * time.Millisecond}, g, ps, members)
		cpu += join + follow
		followCPU += follow
		if err := st.DeleteGroup(context.Background(), g, true); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(followCPU.Nanoseconds())/float64(b.N), "follow-cpu-ns/op")
}
