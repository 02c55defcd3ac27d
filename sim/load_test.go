package sim

import (
	"bytes"
	"os"
	"reflect"
	"testing"
)

// TestLoadStudy runs the load study's scenarios (the large one only with
// HERDSIM_LARGE=1) with herd and the KCL 3.x model, seed 1, and requires
// every criterion: herd in the band within two report intervals, no more
// moves until then than the model, nothing moved under noise
// (`herdsim -load -seeds 10` checks seeds 1-10).
func TestLoadStudy(t *testing.T) {
	var scs []LoadScenario
	for _, sc := range LoadScenarios() {
		if !sc.Large || os.Getenv("HERDSIM_LARGE") != "" {
			scs = append(scs, sc)
		}
	}
	var results []*LoadResult
	for _, sc := range scs {
		for _, p := range []string{"herd", "kcl-3.x"} {
			r, err := RunLoad(t.Context(), sc, p, 1)
			if err != nil {
				t.Fatal(err)
			}
			results = append(results, r)
		}
	}
	var buf bytes.Buffer
	if err := WriteLoadTable(&buf, scs, results); err != nil {
		t.Fatal(err)
	}
	t.Log(buf.String())
	for _, c := range LoadCriteria(scs, results) {
		if !c.OK {
			t.Errorf("%s: %s: %s", c.Scenario, c.What, c.Got)
		}
	}
}

// TestLoadDeterministic: a load-study run is a function of its seed.
func TestLoadDeterministic(t *testing.T) {
	sc := LoadScenarios()[1]
	for _, p := range LoadPolicies {
		a, err := RunLoad(t.Context(), sc, p, 7)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := RunLoad(t.Context(), sc, p, 7)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%s: two runs of seed 7 differ", p)
		}
	}
}
