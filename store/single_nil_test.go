package store_test

import (
	"testing"

	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/storetest"
)

// Claim and Release given no store fail with ErrInvalid; neither panics.
func TestClaimAndReleaseNilStore(t *testing.T) {
	calls := map[string]func() error{
		"Claim":   func() error { _, err := store.Claim(t.Context(), nil, "g", "p", "s"); return err },
		"Release": func() error { return store.Release(t.Context(), nil, "g", "p", "s", 1) },
	}
	storetest.ExpectInvalid(t, "with a nil store", calls)
}
