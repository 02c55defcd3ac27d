package herd

import (
	"log/slog"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/herdhq/herd/store/memstore"
)

// noisyFleet's handlers report a load of their own, base[p] times noise
// drawn anew at every report interval, and it counts handler starts.
type noisyFleet struct {
	mu     sync.Mutex
	base   map[string]float64
	noise  float64 // ± this fraction
	rng    *rand.Rand
	starts int
}

func (f *noisyFleet) handler(every time.Duration) Handler {
	return func(c *Claim) error {
		f.mu.Lock()
		f.starts++
		f.mu.Unlock()
		for {
			f.mu.Lock()
			v := f.base[c.Partition] * (1 + f.noise*(2*f.rng.Float64()-1))
			f.mu.Unlock()
			c.ReportLoad(v)
			select {
			case <-c.Context().Done():
				return nil
			case <-time.After(every):
			}
		}
	}
}

// TestLoadNoiseMovesNothing: 20 members run 1,024 partitions of Zipf(1.1)
// loads (the hottest, 13 % of the total, alone on a member). Once balanced by load (within a
// few report intervals), loads reported with ±20 % of noise at every
// interval move no partition over an hour.
func TestLoadNoiseMovesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const members, parts, every = 20, 1024, 30 * time.Second
		f := &noisyFleet{base: map[string]float64{}, rng: rand.New(rand.NewPCG(7, 11))}
		for i := range parts {
			f.base[strconv.Itoa(i)] = 10 / math.Pow(float64(i+1), 1.1)
		}
		st := memstore.New()
		var ms []*Member
		for i := range members {
			m, err := Join(t.Context(), st, Config{Group: "g", Member: "m" + strconv.Itoa(i), Partitions: Numbered(parts),
				Handler: f.handler(every / 3), LoadReportInterval: every, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			ms = append(ms, m)
		}
		// Placed by count, then by load once the loads are published.
		time.Sleep(5 * every)
		synctest.Wait()
		loadOf := func() []float64 {
			var ls []float64
			for _, m := range ms {
				var l float64
				for _, p := range m.Owned() {
					l += f.base[p]
				}
				ls = append(ls, l)
			}
			return ls
		}
		ls := loadOf()
		var sum, top float64
		for _, l := range ls {
			sum += l
			top = max(top, l)
		}
		if mean := sum / members; top > 1.1*max(mean, f.base["0"]) {
			t.Fatalf("after 5 report intervals the member loads are %v: the busiest %.2f is more than 10 %% above the bound %.2f", ls, top, max(mean, f.base["0"]))
		}
		f.mu.Lock()
		f.noise, f.starts = 0.2, 0
		f.mu.Unlock()
		time.Sleep(time.Hour)
		synctest.Wait()
		f.mu.Lock()
		starts := f.starts
		f.mu.Unlock()
		if starts != 0 {
			t.Errorf("±20 %% noise on the reported loads started %d handlers (moved partitions) in an hour; want none", starts)
		}
		for _, m := range ms {
			if err := m.Leave(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
	})
}
