package dashboard

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
)

// bigSnapshot is a group of n partitions owned round-robin by 10 live
// sessions.
func bigSnapshot(n int) *store.Snapshot {
	snap := &store.Snapshot{Kind: store.KindPartitions, PartitionSetStored: true}
	for m := range 10 {
		snap.Sessions = append(snap.Sessions, store.SessionInfo{ID: fmt.Sprintf("SESSION%019d", m), Member: fmt.Sprintf("m%02d", m), Weight: 1, Remaining: 10 * time.Second})
	}
	epoch := uint64(time.Now().UnixMicro())
	for i := range n {
		id := fmt.Sprintf("%06d", i)
		s := snap.Sessions[i%10]
		snap.Partitions = append(snap.Partitions, store.Partition{ID: id})
		snap.Owners = append(snap.Owners, store.Ownership{Partition: id, Session: s.ID, Member: s.Member, Epoch: epoch + uint64(i)})
	}
	return snap
}

// BenchmarkStateEvent is what the follower does with a snapshot of
// 100,000 partitions it has just read, before the first page is sent it.
func BenchmarkStateEvent(b *testing.B) {
	snap := bigSnapshot(100_000)
	b.ReportAllocs()
	var size int
	for b.Loop() {
		ev := encode("state", newWireState("g", snap))
		size = len(ev.data)
	}
	b.ReportMetric(float64(size), "bytes")
}

// The state event carries the columns /api/group answers: the same
// sessions in the same order, owners, epochs and given-back records,
// whatever the records (released, of an ended session, outside the set,
// given back by a live session or by an ended one).
func TestWireStateIsGroupState(t *testing.T) {
	snap := &store.Snapshot{
		Sessions: []store.SessionInfo{{ID: "A", Member: "a", Weight: 1}, {ID: "C", Member: "c", Weight: 2}},
		Partitions: []store.Partition{{ID: "p1"}, {ID: "p2"}, {ID: "p3"}, {ID: "p4"}, {ID: "p5"}, {ID: "p6"},
			{ID: `q"<&\`}},
		Owners: []store.Ownership{
			{Partition: "p0", Session: "A", Member: "a", Epoch: 1}, // outside the set
			{Partition: "p1", Session: "C", Member: "c", Epoch: 2},
			{Partition: "p2", Session: "B", Member: "b", Epoch: 3}, // ended
			{Partition: "p3", Epoch: 4, GivenBack: "A"},            // released, given back by a live session
			{Partition: "p4", Session: "A", Member: "a", Epoch: 5, GivenBack: "B"},
			{Partition: "p6", Session: "C", Member: "c", Epoch: 1 << 52},
			{Partition: `q"<&\`, Session: "A", Member: "a", Epoch: 7},
		},
	}
	g := newGroupState("g", snap)
	var got struct {
		Sessions   []string    `json:"sessions"`
		Partitions string      `json:"partitions"`
		Owner      string      `json:"owner"`
		Epoch      string      `json:"epoch"`
		GivenBack  []givenBack `json:"givenBack"`
		N          int         `json:"n"`
	}
	if err := json.Unmarshal(encode("state", newWireState("g", snap)).data, &got); err != nil {
		t.Fatal(err)
	}
	owner, _ := base64.StdEncoding.DecodeString(got.Owner)
	epoch, _ := base64.StdEncoding.DecodeString(got.Epoch)
	ids := strings.Split(got.Partitions, "\n")
	if got.N != len(g.Partitions) || !slices.Equal(ids, g.Partitions) || !slices.Equal(got.Sessions, g.Sessions) ||
		!slices.Equal(got.GivenBack, g.GivenBack) || len(owner) != 4*got.N || len(epoch) != 8*got.N {
		t.Fatalf("state event %+v; /api/group %+v", got, g)
	}
	for i := range got.N {
		o := int(int32(binary.LittleEndian.Uint32(owner[4*i:])))
		e := uint64(math.Float64frombits(binary.LittleEndian.Uint64(epoch[8*i:])))
		if o != g.Owner[i] || e != g.Epoch[i] {
			t.Errorf("partition %s: owner %d epoch %d in the state event; %d and %d in /api/group", ids[i], o, e, g.Owner[i], g.Epoch[i])
		}
	}
}
