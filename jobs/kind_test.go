package jobs_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/jobs"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/memstore"
)

// A jobs member is refused by a group of partitions (herd run, herd.Join),
// whose records are not job records, and leaves its set alone.
func TestStartRefusesGroupOfPartitions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		quiet := slog.New(slog.DiscardHandler)
		m, err := herd.Join(t.Context(), st, herd.Config{Group: "dup", Member: "r", Partitions: herd.Numbered(4),
			Handler: func(*herd.Claim) error { return nil }, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Leave(t.Context())
		_, err = jobs.Start(t.Context(), jobs.Config{Store: st, Group: "dup", Member: "j", Keys: []string{"x", "y"}, Every: time.Minute,
			Run: func(context.Context, jobs.Run) error { return nil }, Logger: quiet})
		if !errors.Is(err, store.ErrGroupKind) {
			t.Fatalf("jobs.Start in a group of partitions: %v; want ErrGroupKind", err)
		}
		snap, err := st.Snapshot(t.Context(), "dup")
		if err != nil {
			t.Fatal(err)
		}
		if len(snap.Partitions) != 4 {
			t.Fatalf("after the refused start the group has %d partitions; want its 4", len(snap.Partitions))
		}
	})
}
