package sim

import (
	"slices"
	"time"

	"github.com/herdhq/herd/balance"
)

// Herd's load-aware balance in the load study. Each member, at its report,
// publishes the smoothed load of every partition it runs; the published
// value belongs to the partition, so a new owner starts from it. Smoothing
// is an exponential average of weight HerdAlpha, except that a report
// more than HerdJump times above or below the published value replaces it
// (a real change, not noise: +-20 % noise stays within a factor 1.5), so
// that a partition ten times hotter is seen at its owner's next report.
// Every member computes the same plan from the published loads
// (balance.Assigner.AssignLoad with HerdLoadOptions), so the study computes
// it once, after every report, and carries its moves out at once.
const (
	HerdAlpha = 0.05
	HerdJump  = 1.5
)

// HerdLoadOptions are the options of herd's balance in the load study: the
// default band (10 %), a floor of 0.02 of a unit of capacity (a member's
// CPU: 2 % of a core per unit) and at most 1,000 moves per plan, which
// does not cut the study's rounds short (see AssignLoad on budgets).
var HerdLoadOptions = balance.LoadOptions{Band: 0.10, Floor: 0.02, MaxMoves: 1000}

type herdLoad struct {
	dirty   bool // owners changed since the last plan, or no plan yet
	a       balance.Assigner
	members []balance.Member
	parts   []balance.Partition
	pub     []float64
	target  []int32
}

func newHerdLoad(w *loadWorld) *herdLoad {
	return &herdLoad{dirty: true, members: loadMembers(w), parts: loadPartitions(len(w.load))}
}

func (h *herdLoad) name() string { return "herd" }

// start: the fleet has run for long, and its smoothed loads have reached
// the true loads.
func (h *herdLoad) start(w *loadWorld) { h.pub = slices.Clone(w.load) }

// report publishes member m's smoothed loads; the members plan again if
// a published load changed, or if the last plan moved partitions (their
// replica changed).
func (h *herdLoad) report(w *loadWorld, m int) {
	changed := false
	for _, i := range w.mp[m] {
		x, s := w.obs[i], h.pub[i]
		if s > 0 && x <= s*HerdJump && x*HerdJump >= s {
			x = s + HerdAlpha*(x-s)
		}
		if x != s {
			h.pub[i], changed = x, true
		}
	}
	if !w.balancing || !changed && !h.dirty {
		return
	}
	t, err := h.a.AssignLoad(h.members, h.parts, w.owner, h.pub, HerdLoadOptions, h.target)
	if err != nil {
		panic(err) // the study's input is sorted and whole
	}
	h.target = t
	before := w.moves
	for i, m := range t {
		w.move(int32(i), m)
	}
	h.dirty = w.moves != before
}

func (h *herdLoad) tick(*loadWorld, time.Duration) {}

// KCL 3.x's variance-based lease assignment in the load study
// (VarianceBasedLeaseAssignmentDecider with its defaults): an elected
// leader runs the lease assignment every KCLLoop and balances the workers'
// variance every KCLEvery-th run. Workers report their CPU utilisation
// every ReportEvery (the load of their leases over their capacity), which
// the leader smooths with an exponential average of weight KCLAlpha, and
// each lease's throughput (here: the lease's last reported load, as if
// throughput were proportional to CPU, the best case for the model).
// Balancing: with avg the mean of the workers' utilisations, it runs only
// if some worker is outside avg +-10 %; the workers at or above avg x 1.1
// (or the most loaded, if none) give up their throughput x (u - avg)/u x
// 60 %, largest first, in leases taken at random (each lease taken only
// while the remainder stays positive; the smallest one if none is, as
// allowThroughputOvershoot does); each lease goes to the worker with the
// most room to the average ((avg - u)/u, extrapolated as leases are
// added), and a donor's leases stop going out at the first lease that
// would put that worker above the average.
const (
	KCLLoop  = 20 * time.Second
	KCLEvery = 3
	KCLAlpha = 0.5
)

type kclLoad struct {
	util  []float64 // smoothed utilisation per worker
	thr   []float64 // each lease's reported throughput
	runs  int
	phase int
}

func newKCLLoad(w *loadWorld) *kclLoad {
	return &kclLoad{phase: w.rng.IntN(int(KCLLoop / time.Second))}
}

func (k *kclLoad) name() string { return "kcl-3.x" }

func (k *kclLoad) start(w *loadWorld) {
	k.thr = slices.Clone(w.obs)
	k.util = make([]float64, len(w.caps))
	for m := range k.util {
		k.util[m] = w.l[m] / w.caps[m] // smoothed for long
	}
}

// reported is worker m's utilisation as it reports it.
func (k *kclLoad) reported(w *loadWorld, m int) float64 {
	sum := 0.0
	for _, i := range w.mp[m] {
		sum += w.obs[i]
	}
	return sum / w.caps[m]
}

func (k *kclLoad) report(w *loadWorld, m int) {
	k.util[m] = KCLAlpha*k.reported(w, m) + (1-KCLAlpha)*k.util[m]
	for _, i := range w.mp[m] {
		k.thr[i] = w.obs[i]
	}
}

func (k *kclLoad) tick(w *loadWorld, now time.Duration) {
	s := int(now / time.Second)
	loop := int(KCLLoop / time.Second)
	if ((s-k.phase)%loop+loop)%loop != 0 {
		return
	}
	k.runs++
	if w.balancing && k.runs%KCLEvery == 0 {
		k.balance(w)
	}
}

// balance is one variance balancing of the leader.
func (k *kclLoad) balance(w *loadWorld) {
	n := len(k.util)
	avg := 0.0
	for _, u := range k.util {
		avg += u
	}
	avg /= float64(n)
	upper, lower := avg*1.1, avg*0.9
	trigger, most := false, 0
	var donors []int
	for m, u := range k.util {
		if u > upper || u < lower {
			trigger = true
		}
		if u >= upper {
			donors = append(donors, m)
		}
		if u > k.util[most] {
			most = m
		}
	}
	if !trigger {
		return
	}
	if len(donors) == 0 {
		donors = []int{most}
	}
	take := make([]float64, n)
	for _, m := range donors {
		if u := k.util[m]; u > 0 {
			take[m] = k.total(w, m) * (u - avg) / u * 0.6
		}
	}
	slices.SortStableFunc(donors, func(a, b int) int {
		switch {
		case take[a] > take[b]:
			return -1
		case take[a] < take[b]:
			return 1
		}
		return 0
	})
	// The assignable workers, most room to the average first.
	u := slices.Clone(k.util)
	queue := make([]bool, n)
	for m := range queue {
		queue[m] = true
	}
	for _, d := range donors {
		for _, i := range k.leasesToTake(w, d, take[d]) {
			b := poll(queue, u, avg)
			if b < 0 {
				break
			}
			add := k.thr[i] / w.caps[b]
			if u[b]+add > avg {
				break // the polled worker is not put back
			}
			queue[b] = true
			if w.owner[i] == int32(b) {
				continue
			}
			w.move(i, int32(b))
			u[b] += add
		}
	}
}

// total is the throughput of worker m's leases.
func (k *kclLoad) total(w *loadWorld, m int) float64 {
	sum := 0.0
	for _, i := range w.mp[m] {
		sum += k.thr[i]
	}
	return sum
}

// leasesToTake picks donor d's leases at random until their throughput
// would exceed want; the smallest lease if none fits.
func (k *kclLoad) leasesToTake(w *loadWorld, d int, want float64) []int32 {
	leases := slices.Clone(w.mp[d])
	if len(leases) == 0 {
		return nil
	}
	if k.total(w, d) == 0 {
		return leases[:1]
	}
	w.rng.Shuffle(len(leases), func(i, j int) { leases[i], leases[j] = leases[j], leases[i] })
	var out []int32
	for _, i := range leases {
		if want-k.thr[i] <= 0 {
			continue
		}
		want -= k.thr[i]
		out = append(out, i)
	}
	if len(out) == 0 {
		small := leases[0]
		for _, i := range leases[1:] {
			if k.thr[i] < k.thr[small] {
				small = i
			}
		}
		out = append(out, small)
	}
	return out
}

// poll removes from the queue the worker with the most room to the
// average, (avg - u)/u, and returns it (-1 if the queue is empty).
func poll(queue []bool, u []float64, avg float64) int {
	best, room := -1, 0.0
	for m, in := range queue {
		if !in {
			continue
		}
		r := (avg - u[m]) / u[m] // +Inf for an idle worker
		if best < 0 || r > room {
			best, room = m, r
		}
	}
	if best >= 0 {
		queue[best] = false
	}
	return best
}
