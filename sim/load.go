package sim

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/herdhq/herd/balance"
)

// The load study: how a policy spreads partitions of unequal load (see
// docs/simulation.md, "Load-aware balance"). It is apart from the scenarios
// of member processes above: no store, no faults, only loads, reports and
// the moves a policy makes, in steps of one second of virtual time.

// LoadScenario is one scenario of the load study. Members report the loads
// of their partitions every ReportEvery, each at its own phase; the loads
// follow a Zipf law. Before t0 the fleet holds the count balance for Warm
// (balancing by load from the start if BalanceInWarm); at t0 the change
// happens: balancing by load is switched on, or (Hotter > 0) the partition
// of that load rank becomes ten times hotter. The run is measured for
// Length after t0.
type LoadScenario struct {
	Name, About         string
	Members, Partitions int
	Zipf                float64 // exponent of the loads' Zipf law
	Caps                []int   // member capacities, cycled (nil: all 1)
	Noise               float64 // every report is the load x U(1-Noise, 1+Noise)
	Warm                time.Duration
	BalanceInWarm       bool
	Hotter              int // load rank (1 = hottest) made ten times hotter at t0
	Length              time.Duration
	Large               bool
	// Utilisation is the fleet's total load over its total capacity.
	Utilisation float64
}

// ReportEvery is the report interval of the load study's members (herd's
// and the KCL 3.x workers').
const ReportEvery = 30 * time.Second

// LoadScenarios returns the scenarios of the load study.
func LoadScenarios() []LoadScenario {
	base := LoadScenario{Members: 20, Partitions: 1024, Zipf: 1.1, Warm: 2 * time.Minute, Length: 10 * time.Minute, Utilisation: 0.5}
	zipf := base
	zipf.Name, zipf.About = "zipf", "Zipf(1.1) loads on 1,024 partitions and 20 members, from the count balance"
	hot := base
	hot.Name, hot.About = "hot", "as zipf, balanced for 10 minutes; then the 8th hottest partition becomes ten times hotter"
	hot.Warm, hot.BalanceInWarm, hot.Hotter = 10*time.Minute, true, 8
	noise := base
	noise.Name, noise.About = "noise", "as zipf with +-20% multiplicative noise on every report, balanced for 10 minutes; then one hour"
	noise.Warm, noise.BalanceInWarm, noise.Noise, noise.Length = 10*time.Minute, true, 0.2, time.Hour
	caps := base
	caps.Name, caps.About = "capacity", "as zipf on members of capacities 1, 2 and 4"
	caps.Caps = []int{1, 2, 4}
	large := base
	large.Name, large.About = "large", "Zipf(1.1) loads on 100,000 partitions and 100 members, from the count balance"
	large.Members, large.Partitions, large.Large = 100, 100000, true
	return []LoadScenario{zipf, hot, noise, caps, large}
}

// loadWorld is the state of one run: the true loads, who owns what, and the
// last load each owner observed for each partition.
type loadWorld struct {
	sc        LoadScenario
	rng       *rand.Rand
	caps      []float64
	load      []float64 // true loads
	owner     []int32
	obs       []float64 // last observed (reported) load
	mp        [][]int32 // each member's partitions
	at        []int32   // index of a partition in mp[owner]
	l         []float64 // true member loads
	pos       []int     // member partitions of load > 0
	maxe      float64   // the hottest partition's load
	moves     int
	balancing bool
}

// loadPolicy is a policy of the load study.
type loadPolicy interface {
	name() string
	// start is called once the world is set up, owners and reports in.
	start(w *loadWorld)
	// report: member m has just observed its partitions' loads (w.obs).
	report(w *loadWorld, m int)
	// tick is called every second, after the reports of that second.
	tick(w *loadWorld, now time.Duration)
}

func newLoadWorld(sc LoadScenario, seed uint64) *loadWorld {
	w := &loadWorld{sc: sc, rng: rand.New(rand.NewPCG(seed, 31))}
	n, P := sc.Members, sc.Partitions
	w.caps = make([]float64, n)
	capSum := 0.0
	for m := range w.caps {
		w.caps[m] = 1
		if len(sc.Caps) > 0 {
			w.caps[m] = float64(sc.Caps[m%len(sc.Caps)])
		}
		capSum += w.caps[m]
	}
	// Zipf loads, shuffled over the partitions, scaled to the utilisation.
	w.load = make([]float64, P)
	sum := 0.0
	for i := range w.load {
		w.load[i] = math.Pow(float64(i+1), -sc.Zipf)
		sum += w.load[i]
	}
	for i := range w.load {
		w.load[i] *= sc.Utilisation * capSum / sum
	}
	w.rng.Shuffle(P, func(i, j int) { w.load[i], w.load[j] = w.load[j], w.load[i] })
	w.maxe = slices.Max(w.load)
	// The count balance (herd today) from nothing.
	members, parts := loadMembers(w), loadPartitions(P)
	none := make([]int32, P)
	for i := range none {
		none[i] = -1
	}
	var a balance.Assigner
	t, _ := a.AssignSorted(members, parts, none, nil)
	w.owner = make([]int32, P)
	w.at = make([]int32, P)
	w.mp = make([][]int32, n)
	w.l, w.pos = make([]float64, n), make([]int, n)
	w.obs = make([]float64, P)
	for i, m := range t {
		w.owner[i] = -1
		w.place(int32(i), m)
		w.obs[i] = w.observe(i)
	}
	return w
}

func loadMembers(w *loadWorld) []balance.Member {
	ms := make([]balance.Member, len(w.caps))
	for m := range ms {
		ms[m] = balance.Member{ID: fmt.Sprintf("m%03d", m), Weight: int(w.caps[m])}
	}
	return ms
}

func loadPartitions(P int) []balance.Partition {
	ps := make([]balance.Partition, P)
	for i := range ps {
		ps[i] = balance.Partition{ID: fmt.Sprintf("p%06d", i), Weight: 1}
	}
	return ps
}

// observe is one report of partition i's load, with the scenario's noise.
func (w *loadWorld) observe(i int) float64 {
	x := w.load[i]
	if w.sc.Noise > 0 {
		x *= 1 + w.sc.Noise*(2*w.rng.Float64()-1)
	}
	return x
}

// place puts partition i on member m (from its owner, if any).
func (w *loadWorld) place(i, m int32) {
	if o := w.owner[i]; o >= 0 {
		k := w.at[i]
		last := w.mp[o][len(w.mp[o])-1]
		w.mp[o][k], w.at[last] = last, k
		w.mp[o] = w.mp[o][:len(w.mp[o])-1]
		w.l[o] -= w.load[i]
		if w.load[i] > 0 {
			w.pos[o]--
		}
	}
	w.owner[i] = m
	w.at[i] = int32(len(w.mp[m]))
	w.mp[m] = append(w.mp[m], i)
	w.l[m] += w.load[i]
	if w.load[i] > 0 {
		w.pos[m]++
	}
}

// move hands partition i over to member m: one move.
func (w *loadWorld) move(i, m int32) {
	if w.owner[i] == m {
		return
	}
	w.place(i, m)
	w.moves++
}

// setLoad changes partition i's true load.
func (w *loadWorld) setLoad(i int, x float64) {
	m := w.owner[i]
	w.l[m] += x - w.load[i]
	if (w.load[i] > 0) != (x > 0) {
		if x > 0 {
			w.pos[m]++
		} else {
			w.pos[m]--
		}
	}
	w.load[i] = x
	w.maxe = slices.Max(w.load)
}

// RunLoad runs one load scenario with one policy ("herd" or "kcl-3.x").
func RunLoad(ctx context.Context, sc LoadScenario, policy string, seed uint64) (*LoadResult, error) {
	w := newLoadWorld(sc, seed)
	var p loadPolicy
	switch policy {
	case "herd":
		p = newHerdLoad(w)
	case "kcl-3.x":
		p = newKCLLoad(w)
	default:
		return nil, fmt.Errorf("load study: unknown policy %q (have herd, kcl-3.x)", policy)
	}
	p.start(w)
	phase := make([]int, sc.Members)
	for m := range phase {
		phase[m] = w.rng.IntN(int(ReportEvery / time.Second))
	}
	res := &LoadResult{Scenario: sc.Name, Policy: p.name()}
	w.balancing = sc.BalanceInWarm
	every := int(ReportEvery / time.Second)
	start := -int(sc.Warm / time.Second)
	var movesAt0 int
	for s := start; s <= int(sc.Length/time.Second); s++ {
		if s%60 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		now := time.Duration(s) * time.Second
		if s == 0 {
			res.Before = res.state(w, 0, 0)
			w.balancing = true
			if sc.Hotter > 0 {
				i := w.rank(sc.Hotter)
				w.setLoad(i, 10*w.load[i])
				res.Hot = fmt.Sprintf("p%06d", i)
			}
			movesAt0 = w.moves
		}
		for m := range phase {
			if ((s-phase[m])%every+every)%every == 0 {
				for _, i := range w.mp[m] {
					w.obs[i] = w.observe(int(i))
				}
				p.report(w, m)
			}
		}
		p.tick(w, now)
		if s >= 0 {
			res.sample(w, now, w.moves-movesAt0)
		}
	}
	res.finish()
	return res, nil
}

// rank returns the partition of the given load rank (1: the hottest).
func (w *loadWorld) rank(r int) int {
	idx := make([]int, len(w.load))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		if c := cmp.Compare(w.load[b], w.load[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	return idx[min(max(r, 1), len(idx))-1]
}
