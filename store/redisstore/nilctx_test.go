package redisstore

import (
	"context"
	"testing"

	"github.com/herdhq/herd/internal/redistest"
	"github.com/herdhq/herd/store/storetest"
)

// Open and ServerCPU with a nil context fail with ErrInvalid and do not
// panic (the calls of the store contract are the conformance suite's
// context/nil).
func TestNilContext(t *testing.T) {
	s, _ := newTestStore(t)
	var nilCtx context.Context
	calls := map[string]func() error{
		"Open": func() error {
			o, err := Open(nilCtx, redistest.URL(), WithPrefix(s.prefix))
			if err == nil {
				_ = o.Close()
			}
			return err
		},
		"ServerCPU": func() error { _, err := s.ServerCPU(nilCtx); return err },
	}
	storetest.ExpectInvalid(t, "with a nil context", calls)
}
