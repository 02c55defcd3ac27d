package herd

import (
	"encoding/binary"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/herdhq/herd/store/memstore"
)

// markFleet is a group whose handlers Mark at a rate set per partition
// (per second, default 10), and which counts the handlers running each
// partition at once.
type markFleet struct {
	mu      sync.Mutex
	rate    map[string]int
	running map[string]int
	twice   []string          // partitions seen with two handlers at once
	marked  map[string]uint64 // the last position marked per partition
	behind  []string          // partitions whose handler started behind the last mark
}

func (f *markFleet) handler(c *Claim) error {
	var pos uint64
	if b := c.LastCheckpoint(); len(b) == 8 {
		pos = binary.BigEndian.Uint64(b)
	}
	f.mu.Lock()
	if f.running[c.Partition]++; f.running[c.Partition] > 1 {
		f.twice = append(f.twice, c.Partition)
	}
	if pos < f.marked[c.Partition] {
		f.behind = append(f.behind, c.Partition)
	}
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.running[c.Partition]--
		f.mu.Unlock()
	}()
	for {
		f.mu.Lock()
		r := f.rate[c.Partition]
		f.mu.Unlock()
		if r == 0 {
			r = 10
		}
		select {
		case <-c.Context().Done():
			return nil
		case <-time.After(time.Second / time.Duration(r)):
		}
		pos++
		if err := c.Mark(binary.BigEndian.AppendUint64(nil, pos)); err != nil {
			return nil
		}
		f.mu.Lock()
		f.marked[c.Partition] = pos
		f.mu.Unlock()
	}
}

// load is the sum of the rates of ps.
func (f *markFleet) load(ps []string) (sum, hot int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range ps {
		r := f.rate[p]
		if r == 0 {
			r = 10
		}
		if r > 10 {
			hot++
		}
		sum += r
	}
	return sum, hot
}

// TestBalanceByMeasuredLoad: four members run 16 partitions, four each (by
// count: every load is equal). Two partitions of one member become ten
// times busier (their handlers Mark ten times as often): the members
// measure it, publish it, and move partitions until each hot partition is
// alone on a member and the busiest member is within 15 % of the lower
// bound, max(hottest partition, total / members); no partition ever runs
// on two members at once, and each new owner resumes from the last
// position marked (the handoff writes the last mark before the release). Balanced by count, the member keeps both hot
// partitions: 220 against a bound of 100.
func TestBalanceByMeasuredLoad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		f := &markFleet{rate: map[string]int{}, running: map[string]int{}, marked: map[string]uint64{}}
		var ms []*Member
		for _, id := range []string{"a", "b", "c", "d"} {
			m, err := Join(t.Context(), st, Config{Group: "g", Member: id, Partitions: Numbered(16), Handler: f.handler,
				LoadReportInterval: 5 * time.Second, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			ms = append(ms, m)
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		for _, m := range ms {
			if n := len(m.Owned()); n != 4 {
				t.Fatalf("member %s runs %d partitions before any load differs; want 4", m.ID(), n)
			}
		}
		hot := ms[0].Owned()[:2]
		f.mu.Lock()
		for _, p := range hot {
			f.rate[p] = 100
		}
		f.mu.Unlock()
		time.Sleep(90 * time.Second)
		synctest.Wait()
		var loads []int
		for _, m := range ms {
			l, h := f.load(m.Owned())
			if h > 1 {
				t.Errorf("member %s runs %d hot partitions (%v); want each alone", m.ID(), h, m.Owned())
			}
			loads = append(loads, l)
		}
		if top := slices.Max(loads); float64(top) > 1.15*100 {
			t.Errorf("member loads %v: the busiest is %d; want at most 115 (the hottest partition, 100, +15 %%)", loads, top)
		}
		if len(f.twice) > 0 {
			t.Errorf("partitions %v ran on two handlers at once", f.twice)
		}
		if len(f.behind) > 0 {
			t.Errorf("partitions %v started behind their last mark: a move for load lost progress", f.behind)
		}
		for _, m := range ms {
			if err := m.Leave(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
	})
}
