package pgstore

import (
	"testing"

	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/storetest"
)

// The conformance suite against the real server: all subtests share one
// schema (each works in its own group), dropped at the end.
func TestConformance(t *testing.T) {
	requireServer(t)
	schema := newSchema(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		return openIn(t, schema)
	})
}

// The conformance suite with LISTEN off: Changes wakes by polling alone.
func TestConformanceListenOff(t *testing.T) {
	requireServer(t)
	schema := newSchema(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		return openIn(t, schema, WithListen(false), WithPollInterval(50_000_000))
	})
}

func TestTrim(t *testing.T) {
	s := openTest(t, WithLogLimit(10))
	storetest.RunTrim(t, s, 10)
}
