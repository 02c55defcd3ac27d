package dashboard

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
)

// bigSnapshot is a group of n partitions owned round-robin by 10 live
// sessions, claimed in batches of batch partitions of one session (the
// records of a batch share their epoch).
func bigSnapshot(n, batch int) *store.Snapshot {
	snap := &store.Snapshot{Kind: store.KindPartitions, PartitionSetStored: true}
	for m := range 10 {
		snap.Sessions = append(snap.Sessions, store.SessionInfo{ID: fmt.Sprintf("SESSION%019d", m), Member: fmt.Sprintf("m%02d", m), Weight: 1, Remaining: 10 * time.Second})
	}
	epoch := uint64(time.Now().UnixMicro())
	for i := range n {
		id := fmt.Sprintf("%06d", i)
		s := snap.Sessions[i%10]
		snap.Partitions = append(snap.Partitions, store.Partition{ID: id})
		snap.Owners = append(snap.Owners, store.Ownership{Partition: id, Session: s.ID, Member: s.Member, Epoch: epoch + uint64(i%10*n+i/10/batch)})
	}
	return snap
}

// BenchmarkStateEvent is what the follower does with a snapshot of
// 100,000 partitions it has just read, before the first page is sent it.
// Its records are claimed in batches of 1,000 (as members claim,
// store.MaxBatch), or each in a batch of its own (every epoch distinct).
func BenchmarkStateEvent(b *testing.B) {
	for _, batch := range []int{1000, 1} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			snap := bigSnapshot(100_000, batch)
			b.ReportAllocs()
			var size int
			for b.Loop() {
				ev := encode("state", newWireState("g", snap))
				size = len(ev.data)
			}
			b.ReportMetric(float64(size), "bytes")
		})
	}
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
	got := decodeWire(t, encode("state", newWireState("g", snap)).data)
	if !slices.Equal(got.Partitions, g.Partitions) || !slices.Equal(got.Sessions, g.Sessions) ||
		!slices.Equal(got.GivenBack, g.GivenBack) || !slices.Equal(got.Owner, g.Owner) || !slices.Equal(got.Epoch, g.Epoch) {
		t.Fatalf("state event %+v; /api/group %+v", got, g)
	}
}

// A group of few distinct owner and epoch pairs sends them as slots; one
// of many (every record claimed alone) a pair per partition.
func TestWireStateSlots(t *testing.T) {
	for _, c := range []struct{ batch, slotBytes int }{{1000, 2}, {100, 2}, {1, 0}} {
		snap := bigSnapshot(20_000, c.batch)
		w := newWireState("g", snap)
		if w.SlotBytes != c.slotBytes {
			t.Errorf("batches of %d: %d bytes a slot, want %d", c.batch, w.SlotBytes, c.slotBytes)
		}
		g := newGroupState("g", snap)
		got := decodeWire(t, encode("state", w).data)
		if !slices.Equal(got.Owner, g.Owner) || !slices.Equal(got.Epoch, g.Epoch) {
			t.Errorf("batches of %d: the state event's owners or epochs differ from /api/group's", c.batch)
		}
	}
}

// decodeWire unpacks a state event's columns, as the page does.
func decodeWire(t *testing.T, data []byte) *groupState {
	t.Helper()
	var w wireState
	if err := json.Unmarshal(data, &w); err != nil {
		t.Fatal(err)
	}
	slot, err1 := base64.StdEncoding.DecodeString(w.Slot)
	owner, err2 := base64.StdEncoding.DecodeString(w.SlotOwner)
	epoch, err3 := base64.StdEncoding.DecodeString(w.SlotEpoch)
	if err := errors.Join(err1, err2, err3); err != nil || len(slot) != w.SlotBytes*w.N || len(owner)*2 != len(epoch) ||
		w.SlotBytes == 0 && len(owner) != 4*w.N {
		t.Fatalf("state columns: %v; %d slot bytes for %d partitions of %d bytes; %d and %d bytes of slots", err, len(slot), w.N, w.SlotBytes, len(owner), len(epoch))
	}
	g := &groupState{Sessions: w.Sessions, GivenBack: w.GivenBack, Owner: make([]int, w.N), Epoch: make([]uint64, w.N)}
	if w.N > 0 {
		g.Partitions = strings.Split(w.Partitions, "\n")
	}
	for i := range w.N {
		j := i
		if w.SlotBytes == 2 {
			j = int(binary.LittleEndian.Uint16(slot[2*i:]))
		}
		if 8*j >= len(epoch) {
			t.Fatalf("partition %d: slot %d of %d", i, j, len(epoch)/8)
		}
		g.Owner[i] = int(int32(binary.LittleEndian.Uint32(owner[4*j:])))
		g.Epoch[i] = uint64(math.Float64frombits(binary.LittleEndian.Uint64(epoch[8*j:])))
	}
	return g
}
