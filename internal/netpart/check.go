package netpart

import (
	"fmt"
	"time"
)

// History is everything one run recorded: the children's events of every
// member, sorted by time, and the faults with the times they were applied
// and healed.
type History struct {
	Events     []Event
	Faults     []Fault
	Partitions []string
	TTL        time.Duration
	End        time.Time // when the faults ended and the members were told to leave
	// TieEnds are the server's and the cut member's logs of each LongCut
	// on PostgreSQL, by its index in Faults.
	TieEnds map[int]TieEnd
}

// Bound is how long after a cut a member's partitions must run elsewhere,
// and after a heal the fleet must be settled: TTL + 1 s.
func (h *History) Bound() time.Duration { return h.TTL + time.Second }

// Check reads the whole history and returns every violation it finds,
// each naming the events that show it.
func Check(h *History) []string {
	var v []string
	v = append(v, checkOverlaps(h)...)
	v = append(v, checkCheckpoints(h)...)
	v = append(v, checkTakeovers(h)...)
	v = append(v, checkSettled(h)...)
	return v
}

// child is one run of the child command: from its start to its stop or
// exit line (zero End: killed with SIGKILL, or still running at the end).
type child struct {
	start Event
	end   time.Time
}

// children lists the runs of every partition's child, by partition.
func children(h *History) map[string][]*child {
	byPart := map[string][]*child{}
	open := map[[2]int]*child{} // (member, pid)
	for _, e := range h.Events {
		k := [2]int{e.Member, e.PID}
		switch e.Kind {
		case "start":
			c := &child{start: e}
			open[k] = c
			byPart[e.Partition] = append(byPart[e.Partition], c)
		case "stop", "exit":
			if c := open[k]; c != nil {
				c.end = e.T
				delete(open, k)
			}
		}
	}
	return byPart
}

// checkOverlaps: never two live children of one partition. A child that
// found its partition's lock taken wrote an overlap line; a child that
// started while another child of its partition, on another member, had
// started and not yet written its stop line overlapped it too.
func checkOverlaps(h *History) []string {
	var v []string
	for _, e := range h.Events {
		if e.Kind != "overlap" {
			continue
		}
		held := "still held 10 s later"
		for _, f := range h.Events {
			if f.Kind == "freed" && f.Member == e.Member && f.PID == e.PID {
				held = fmt.Sprintf("freed %v later", f.T.Sub(e.T).Round(time.Millisecond))
			}
		}
		v = append(v, fmt.Sprintf("two live children: the partition's lock was taken at %s (%s)", e, held))
	}
	for _, cs := range children(h) {
		for i, b := range cs {
			for _, a := range cs[:i] {
				if a.start.Member != b.start.Member && !a.end.IsZero() && a.end.After(b.start.T) {
					v = append(v, fmt.Sprintf("two live children: %s started before %s stopped at %s", b.start, a.start, a.end.Format("15:04:05.000000")))
				}
			}
		}
	}
	return v
}

// checkCheckpoints: no checkpoint backwards, no write with a stale epoch
// accepted, no epoch backwards. A child starts from the partition's saved
// checkpoint, which must be at least every value saved before it started;
// a save whose call began after a child with a higher epoch had started
// must have been refused; epochs of a partition's starts increase (or
// repeat, on a restart by the same owner).
func checkCheckpoints(h *History) []string {
	var v []string
	saved := map[string]Event{}   // highest save acknowledged so far, by partition
	started := map[string]Event{} // latest start, by partition
	for _, e := range h.Events {
		p := e.Partition
		switch {
		case e.Kind == "start":
			if s, ok := saved[p]; ok && e.Value < s.Value {
				v = append(v, fmt.Sprintf("checkpoint backwards: %s began before %s", e, s))
			}
			if s, ok := started[p]; ok && e.Epoch < s.Epoch {
				v = append(v, fmt.Sprintf("epoch backwards: %s after %s", e, s))
			}
			started[p] = e
		case e.Saved():
			if s, ok := saved[p]; !ok || e.Value > s.Value {
				saved[p] = e
			}
		}
	}
	// Stale epochs: every start against every save of its partition.
	for _, s := range h.Events {
		if s.Kind != "start" {
			continue
		}
		for _, c := range h.Events {
			if c.Saved() && c.Partition == s.Partition && c.Epoch < s.Epoch && c.Sent.After(s.T) {
				v = append(v, fmt.Sprintf("stale epoch accepted: %s, sent after %s", c, s))
			}
		}
	}
	return v
}

// liveAt returns the child of a partition live at t by the history: the
// last one started before t, unless it stopped before t (nil: none).
// Children of one partition follow each other (checkOverlaps), so an
// earlier child without a stop line was killed before the last started.
func liveAt(cs []*child, t time.Time) *child {
	var last *child
	for _, c := range cs {
		if c.start.T.After(t) {
			break
		}
		last = c
	}
	if last == nil || (!last.end.IsZero() && !last.end.After(t)) {
		return nil
	}
	return last
}

// checkTakeovers: the partitions of a member cut off for longer than the
// bound run elsewhere within it.
func checkTakeovers(h *History) []string {
	var v []string
	byPart := children(h)
	for _, f := range h.Faults {
		if !f.Cuts() || f.End.Sub(f.Start) < h.Bound() {
			continue
		}
		deadline := f.Start.Add(h.Bound())
		for p, cs := range byPart {
			live := liveAt(cs, f.Start)
			if live == nil || live.start.Member != f.Member {
				continue
			}
			moved := false
			for _, c := range cs {
				if c.start.Member != f.Member && c.start.T.After(f.Start) && !c.start.T.After(deadline) {
					moved = true
				}
			}
			if !moved {
				v = append(v, fmt.Sprintf("slow takeover: partition %s of member %d, cut off at %s (%s), did not start elsewhere within %v",
					p, f.Member, f.Start.Format("15:04:05.000"), f, h.Bound()))
			}
		}
	}
	return v
}

// checkSettled: from the bound after each heal until the next fault (or
// the end), no child starts or stops and every partition saves a
// checkpoint. A window under a second is too short to judge and skipped.
func checkSettled(h *History) []string {
	var v []string
	for i, f := range h.Faults {
		from := f.End.Add(h.Bound())
		to := h.End
		if i+1 < len(h.Faults) {
			to = h.Faults[i+1].Start
		}
		if to.Sub(from) < time.Second {
			continue
		}
		savedIn := map[string]bool{}
		for _, e := range h.Events {
			if e.T.Before(from) || !e.T.Before(to) {
				continue
			}
			switch e.Kind {
			case "start", "stop", "exit":
				v = append(v, fmt.Sprintf("not settled %v after the heal of %s at %s: %s", h.Bound(), f, f.End.Format("15:04:05.000"), e))
			case "cp":
				savedIn[e.Partition] = savedIn[e.Partition] || e.Saved()
			}
		}
		for _, p := range h.Partitions {
			if !savedIn[p] {
				v = append(v, fmt.Sprintf("not settled %v after the heal of %s at %s: partition %s saved nothing from %s to %s",
					h.Bound(), f, f.End.Format("15:04:05.000"), p, from.Format("15:04:05.000"), to.Format("15:04:05.000")))
			}
		}
	}
	return v
}

// Figures are what a run measured: for each cut longer than the bound, the
// time from the cut to the last of its member's partitions starting
// elsewhere; for each heal, the time to the last start or stop before the
// next fault (0: nothing moved).
type Figures struct {
	Takeovers []time.Duration
	Settles   []time.Duration
}

// Measure reads the figures of a history.
func Measure(h *History) Figures {
	var fig Figures
	byPart := children(h)
	for i, f := range h.Faults {
		if f.Cuts() && f.End.Sub(f.Start) >= h.Bound() {
			var worst time.Duration
			for _, cs := range byPart {
				live := liveAt(cs, f.Start)
				if live == nil || live.start.Member != f.Member {
					continue
				}
				for _, c := range cs {
					if c.start.Member != f.Member && c.start.T.After(f.Start) {
						worst = max(worst, c.start.T.Sub(f.Start))
						break
					}
				}
			}
			fig.Takeovers = append(fig.Takeovers, worst)
		}
		to := h.End
		if i+1 < len(h.Faults) {
			to = h.Faults[i+1].Start
		}
		var last time.Duration
		for _, e := range h.Events {
			moved := e.Kind == "start" || e.Kind == "stop" || e.Kind == "exit"
			if moved && e.T.After(f.End) && e.T.Before(to) {
				last = e.T.Sub(f.End)
			}
		}
		fig.Settles = append(fig.Settles, last)
	}
	return fig
}
