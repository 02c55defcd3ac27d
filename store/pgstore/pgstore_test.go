package pgstore

import (
	"testing"
	"time"

	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/storetest"
)

// The conformance suite against the real server, each subtest in a schema
// of its own, dropped when it ends.
func TestConformance(t *testing.T) {
	requireServer(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		return openTest(t)
	})
}

// The conformance suite with LISTEN off: Changes wakes by polling alone.
func TestConformanceListenOff(t *testing.T) {
	requireServer(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		return openTest(t, WithListen(false), WithPollInterval(50*time.Millisecond))
	})
}

func TestTrim(t *testing.T) {
	s := openTest(t, WithLogLimit(10))
	storetest.RunTrim(t, s, 10)
}
