package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/herdhq/herd/internal/etcdtest"
	"github.com/herdhq/herd/store"
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
	for name, call := range calls {
		err := func() (err error) {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("panic: %v", r)
				}
			}()
			return call()
		}()
		if !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s with a nil context: %v; want an error wrapping ErrInvalid", name, err)
		}
	}
}
