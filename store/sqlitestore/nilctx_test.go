package sqlitestore_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/sqlitestore"
)

// Open with a nil context fails with ErrInvalid and does not panic (the
// calls of an open Store are the conformance suite's context/nil).
func TestOpenNilContext(t *testing.T) {
	var nilCtx context.Context
	path := filepath.Join(t.TempDir(), "herd.db")
	err := func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("Open with a nil context panicked: %v", r)
			}
		}()
		s, err := sqlitestore.Open(nilCtx, "sqlite://"+path)
		if err == nil {
			_ = s.Close()
		}
		return err
	}()
	if !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Open with a nil context: %v; want an error wrapping ErrInvalid", err)
	}
}
