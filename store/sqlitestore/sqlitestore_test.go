package sqlitestore_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/sqlitestore"
	"github.com/herdhq/herd/store/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// open opens a store on path for the test and closes it at its end.
func open(t testing.TB, path string, opts ...sqlitestore.Option) *sqlitestore.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := sqlitestore.Open(ctx, "sqlite://"+path, opts...)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// TestConformance runs the suite with one Store per subtest, all on one
// file: the subtests run in parallel, so they also exercise many
// connections on one file and wake-ups across Stores.
func TestConformance(t *testing.T) {
	path := filepath.Join(t.TempDir(), "herd.db")
	storetest.Run(t, func(t *testing.T) store.Store { return open(t, path) })
}

func TestTrim(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "herd.db"), sqlitestore.WithLogLimit(50))
	storetest.RunTrim(t, s, 50)
}
