package store_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/herdhq/herd/store"
)

// Claim and Release given no store fail with ErrInvalid; neither panics.
func TestClaimAndReleaseNilStore(t *testing.T) {
	calls := map[string]func() error{
		"Claim":   func() error { _, err := store.Claim(t.Context(), nil, "g", "p", "s"); return err },
		"Release": func() error { return store.Release(t.Context(), nil, "g", "p", "s", 1) },
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
			t.Errorf("%s with a nil store: %v; want an error wrapping ErrInvalid", name, err)
		}
	}
}
