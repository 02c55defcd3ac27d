package sim

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"runtime"
	"sync"
	"time"
)

// Models returns the models of the policies herd is compared with.
func Models() []Policy {
	return []Policy{EventHubs{}, EventHubs{Greedy: true}, KCL{}, Seed001{}}
}

var (
	registryMu sync.Mutex
	registry   []Policy
)

// Register adds a policy that DefaultPolicies lists before the models.
//
// Herd (herdfleet.go) runs herd's real member code, only inside a
// testing/synctest bubble: cmd/herdsim registers it with a Bubble made in
// the test it runs in (testing.Main); TestReport passes it in
// Options.Policies.
func Register(p Policy) {
	registryMu.Lock()
	defer registryMu.Unlock()
	registry = append(registry, p)
}

// DefaultPolicies is every registered policy (herd) followed by the models.
func DefaultPolicies() []Policy {
	registryMu.Lock()
	defer registryMu.Unlock()
	return append(append([]Policy(nil), registry...), Models()...)
}

// Bubbler is implemented by policies whose runs must happen inside a
// virtual-time bubble (a testing/synctest bubble for real member code):
// RunAll calls InBubble with each run.
type Bubbler interface {
	InBubble(run func())
}

// Options select what RunAll runs.
type Options struct {
	// Policies to run (default DefaultPolicies()).
	Policies []Policy
	// Scenarios to run (default Scenarios()).
	Scenarios []Scenario
	// Match, if set, keeps only the scenarios whose name it matches.
	Match *regexp.Regexp
	// Large includes the scenarios marked Large.
	Large bool
	// Parallel is the number of runs at a time (default GOMAXPROCS).
	// Large scenarios always run alone, with their cost measured.
	Parallel int
	// Run tunes every run.
	Run RunOptions
	// Progress, if set, receives a line per finished run.
	Progress io.Writer
	// Skip, if set, leaves out the runs for which it returns true.
	Skip func(p Policy, sc Scenario) bool
}

// Report is the outcome of RunAll.
type Report struct {
	Started   time.Time      `json:"started"`
	Wall      time.Duration  `json:"wall_ns"`
	Seed      uint64         `json:"seed"`
	Policies  []PolicyInfo   `json:"policies"`
	Scenarios []ScenarioInfo `json:"scenarios"`
	// Results, ordered by scenario then policy.
	Results []*Result `json:"results"`
	// Probe, if measured, is the cost of one herd reconcile in the large
	// group, measured apart (ProbeReconcile).
	Probe *ReconcileCost `json:"reconcile_probe,omitempty"`
}

// PolicyInfo describes a policy in the report.
type PolicyInfo struct {
	Name          string        `json:"name"`
	Describe      string        `json:"describe"`
	FailoverBound time.Duration `json:"failover_bound_ns"`
}

// ScenarioInfo describes a scenario in the report.
type ScenarioInfo struct {
	Name       string   `json:"name"`
	About      string   `json:"about"`
	Partitions int      `json:"partitions"`
	Members    int      `json:"members"`
	Steps      []string `json:"steps"`
	Large      bool     `json:"large"`
}

// RunAll runs every selected scenario with every selected policy.
func RunAll(ctx context.Context, o Options) (*Report, error) {
	if o.Policies == nil {
		o.Policies = DefaultPolicies()
	}
	if o.Scenarios == nil {
		o.Scenarios = Scenarios()
	}
	if o.Parallel <= 0 {
		o.Parallel = runtime.GOMAXPROCS(0)
	}
	rep := &Report{Started: time.Now(), Seed: o.Run.withDefaults().Seed}
	for _, p := range o.Policies {
		rep.Policies = append(rep.Policies, PolicyInfo{Name: p.Name(), Describe: p.Describe(), FailoverBound: p.FailoverBound()})
	}
	var scs []Scenario
	for _, sc := range o.Scenarios {
		if (sc.Large && !o.Large) || (o.Match != nil && !o.Match.MatchString(sc.Name)) {
			continue
		}
		scs = append(scs, sc)
		info := ScenarioInfo{Name: sc.Name, About: sc.About, Partitions: sc.Partitions, Members: sc.Members, Large: sc.Large}
		for _, st := range sc.Steps {
			info.Steps = append(info.Steps, st.String())
		}
		rep.Scenarios = append(rep.Scenarios, info)
	}

	type job struct {
		i  int
		sc Scenario
		p  Policy
	}
	var small, large []job
	for _, sc := range scs {
		for _, p := range o.Policies {
			if o.Skip != nil && o.Skip(p, sc) {
				continue
			}
			j := job{i: len(small) + len(large), sc: sc, p: p}
			if sc.Large {
				large = append(large, j)
			} else {
				small = append(small, j)
			}
		}
	}
	rep.Results = make([]*Result, len(small)+len(large))
	var progressMu sync.Mutex
	do := func(j job, ro RunOptions) error {
		var res *Result
		var err error
		if b, ok := j.p.(Bubbler); ok {
			b.InBubble(func() { res, err = Run(ctx, j.p, j.sc, ro) })
		} else {
			res, err = Run(ctx, j.p, j.sc, ro)
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if res == nil {
				res = &Result{Policy: j.p.Name(), Scenario: j.sc.Name, About: j.sc.About}
			}
			res.Err = err.Error()
		}
		rep.Results[j.i] = res
		if o.Progress != nil {
			progressMu.Lock()
			fmt.Fprintf(o.Progress, "done %-20s %-14s in %s (%d events)\n", j.sc.Name, j.p.Name(), res.Cost.Wall.Round(time.Millisecond), res.Cost.Events)
			progressMu.Unlock()
		}
		return nil
	}

	jobs := make(chan job)
	var wg sync.WaitGroup
	var firstErr error
	var errMu sync.Mutex
	for w := 0; w < o.Parallel; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				if err := do(j, o.Run); err != nil {
					errMu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					errMu.Unlock()
				}
			}
		}()
	}
	for _, j := range small {
		if ctx.Err() != nil {
			break
		}
		jobs <- j
	}
	close(jobs)
	wg.Wait()
	if firstErr != nil {
		return rep, firstErr
	}
	for _, j := range large {
		ro := o.Run
		ro.MeasureCost = true
		if err := do(j, ro); err != nil {
			return rep, err
		}
	}
	rep.Results = compact(rep.Results)
	rep.Wall = time.Since(rep.Started)
	return rep, ctx.Err()
}

func compact(rs []*Result) []*Result {
	out := rs[:0]
	for _, r := range rs {
		if r != nil {
			out = append(out, r)
		}
	}
	return out
}
