package netpart

import (
	"strings"
	"testing"
	"time"
)

// base is the time 0 of the synthetic histories below.
var base = time.Unix(1_800_000_000, 0)

func at(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }

func start(ms, member int, p string, epoch, from uint64, pid int) Event {
	return Event{Kind: "start", Member: member, Partition: p, Epoch: epoch, PID: pid, T: at(ms), Value: from}
}

func saved(ms, member int, p string, epoch, value uint64, pid int) Event {
	return Event{Kind: "cp", Member: member, Partition: p, Epoch: epoch, PID: pid, T: at(ms), Value: value, Sent: at(ms - 5)}
}

func stop(ms, member int, p string, epoch uint64, pid int) Event {
	return Event{Kind: "stop", Member: member, Partition: p, Epoch: epoch, PID: pid, T: at(ms)}
}

// handoff is a clean history: partition 0 moves from member 0 to member 1
// when member 0 is cut off at 1 s, within the bound, and nothing moves
// after the heal.
func handoff() *History {
	return &History{
		TTL:        2 * time.Second,
		Partitions: []string{"0"},
		Faults:     []Fault{{Kind: LinkDown, Member: 0, Start: at(1000), End: at(5000)}},
		End:        at(10000),
		Events: []Event{
			start(0, 0, "0", 10, 0, 100),
			saved(200, 0, "0", 10, 1, 100),
			saved(400, 0, "0", 10, 2, 100),
			// killed at its fence time; member 1 takes over after the TTL
			start(3100, 1, "0", 20, 2, 200),
			saved(3300, 1, "0", 20, 3, 200),
			saved(8500, 1, "0", 20, 4, 200),
		},
	}
}

func TestCheckPassesCleanHistory(t *testing.T) {
	if v := Check(handoff()); len(v) != 0 {
		t.Fatalf("violations in a clean history: %v", v)
	}
	fig := Measure(handoff())
	if len(fig.Takeovers) != 1 || fig.Takeovers[0] != 2100*time.Millisecond {
		t.Errorf("takeovers %v, want [2.1s]", fig.Takeovers)
	}
}

// Each case breaks the clean history in one way; Check must name it.
func TestCheckFindsViolations(t *testing.T) {
	cases := []struct {
		name, want string
		edit       func(h *History)
	}{
		{"lock taken", "two live children", func(h *History) {
			h.Events = append(h.Events, Event{Kind: "overlap", Member: 2, Partition: "0", Epoch: 20, PID: 300, T: at(3200)})
		}},
		{"start before stop", "two live children", func(h *History) {
			h.Events = append(h.Events, stop(3200, 0, "0", 10, 100))
		}},
		{"checkpoint backwards", "checkpoint backwards", func(h *History) {
			h.Events[3].Value = 1
		}},
		{"stale epoch accepted", "stale epoch accepted", func(h *History) {
			h.Events = append(h.Events, saved(3400, 0, "0", 10, 3, 100))
		}},
		{"epoch backwards", "epoch backwards", func(h *History) {
			h.Events = append(h.Events, start(9000, 2, "0", 15, 4, 300))
		}},
		{"slow takeover", "slow takeover", func(h *History) {
			h.Events[3].T, h.Events[4].T = at(4100), at(4300)
		}},
		{"not settled: a move", "not settled", func(h *History) {
			h.Events = append(h.Events, stop(8600, 1, "0", 20, 200), start(8700, 0, "0", 30, 4, 400))
		}},
		{"not settled: no progress", "saved nothing", func(h *History) {
			h.Events = h.Events[:5]
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := handoff()
			c.edit(h)
			SortEvents(h.Events)
			v := Check(h)
			if len(v) == 0 || !strings.Contains(strings.Join(v, "\n"), c.want) {
				t.Fatalf("Check = %q, want a violation containing %q", v, c.want)
			}
		})
	}
}

func TestParseLine(t *testing.T) {
	e, ok := parseLine("cp 3 1800000000123456 4242 1800000001000000 17 1800000000900000 0", 2)
	if !ok || e.Kind != "cp" || e.Partition != "3" || e.Epoch != 1800000000123456 || e.PID != 4242 ||
		e.Value != 17 || !e.Saved() || e.Member != 2 || e.T.UnixMicro() != 1800000001000000 {
		t.Fatalf("parseLine = %+v, %v", e, ok)
	}
	for _, bad := range []string{"", "start 3 1", "cp 3 x 1 2 3 4 0", "stop 3 1 2"} {
		if _, ok := parseLine(bad, 0); ok {
			t.Errorf("parseLine(%q) accepted a broken line", bad)
		}
	}
}

func TestParseSeeds(t *testing.T) {
	s, err := parseSeeds("1-3,9", "")
	if err != nil || len(s) != 4 || s[0] != 1 || s[3] != 9 {
		t.Fatalf("parseSeeds = %v, %v", s, err)
	}
	if _, err := parseSeeds("5-2", ""); err == nil {
		t.Error("parseSeeds accepted 5-2")
	}
	if s, err := parseSeeds("", "4"); err != nil || len(s) != 4 {
		t.Errorf("parseSeeds of 4 runs = %v, %v", s, err)
	}
}
