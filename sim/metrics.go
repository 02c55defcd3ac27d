package sim

import "time"

// Metrics are the figures of one run, measured after the warm-up.
type Metrics struct {
	// TimeToBalance: from the measured step until the fleet is balanced
	// for good (balanced at every later sample). -1: not balanced at the
	// end.
	TimeToBalance time.Duration `json:"time_to_balance_ns"`
	// TimeToOwned: from the measured step until the end of the last
	// period of GapThreshold or more during which a partition had no live
	// handler (shorter gaps are handoffs). -1: a partition is still
	// unowned at the end.
	TimeToOwned time.Duration `json:"time_to_owned_ns"`
	// UnownedSeconds: partition-seconds without a live handler, handoff
	// gaps included.
	UnownedSeconds float64 `json:"unowned_seconds"`
	// Moves counts handler starts after the warm-up; MinMoves is the
	// fewest starts that reach a balanced assignment after each step that
	// changes the membership or the partition set.
	Moves    int64 `json:"moves"`
	MinMoves int64 `json:"min_moves"`
	// DoubleSeconds: partition-seconds during which two or more live
	// handlers ran for one partition.
	DoubleSeconds float64 `json:"double_ownership_seconds"`
	// PeakImbalance: the largest difference between the most and the
	// least loaded running member at any sample after the warm-up.
	PeakImbalance int `json:"peak_imbalance"`
	// Ops: store operations after the warm-up; Rates: the same per second.
	Ops   Ops   `json:"ops"`
	Rates Rates `json:"rates"`
	// Steady: store operations per second in the quiet window at the end
	// of the warm-up (balanced, nothing happening).
	Steady Rates `json:"steady"`
}

// Rates are store operations per second of virtual time.
type Rates struct {
	Reads       float64 `json:"reads_per_s"` // Ops.Reads and Ops.LogReads
	Writes      float64 `json:"writes_per_s"`
	Rows        float64 `json:"rows_per_s"`
	Checkpoints float64 `json:"checkpoints_per_s"`
	// PerMember: (reads + writes) per second per member.
	PerMember float64 `json:"ops_per_member_per_s"`
	// Server: seconds of one store server's time per second (1 is one
	// Redis core fully busy; more is more than one core could serve).
	Server float64 `json:"server_busy_per_s"`
}

func rates(o Ops, d time.Duration, members int) Rates {
	s := d.Seconds()
	if s <= 0 {
		return Rates{}
	}
	r := Rates{
		Reads: float64(o.Reads+o.LogReads) / s, Writes: float64(o.Writes) / s,
		Rows: float64(o.Rows) / s, Checkpoints: float64(o.Checkpoints) / s,
		Server: o.ServerBusy.Seconds() / s,
	}
	if members > 0 {
		r.PerMember = (r.Reads + r.Writes) / float64(members)
	}
	return r
}

// MoveRatio is Moves / MinMoves (0 when the minimum is 0).
func (m Metrics) MoveRatio() float64 {
	if m.MinMoves == 0 {
		return 0
	}
	return float64(m.Moves) / float64(m.MinMoves)
}
