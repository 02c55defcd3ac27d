package etcdstore

import (
	"context"
	"testing"

	"github.com/herdhq/herd/internal/etcdtest"
	"github.com/herdhq/herd/store/storetest"
)

// Open and ServerCPU with a nil context fail with ErrInvalid and do not
// panic (the calls of the store contract are the conformance suite's
// context/nil).
func TestNilContext(t *testing.T) {
	s, _ := openTest(t)
	u := etcdtest.Need(t)
	var nilCtx context.Context
	calls := map[string]func() error{
		"Open": func() error {
			o, err := Open(nilCtx, u)
			if err == nil {
				_ = o.Close()
			}
			return err
		},
		"ServerCPU": func() error { _, err := s.ServerCPU(nilCtx); return err },
	}
	storetest.ExpectInvalid(t, "with a nil context", calls)
}
