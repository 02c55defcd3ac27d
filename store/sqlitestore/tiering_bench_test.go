package sqlitestore

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
)

// BenchmarkTieRing is one read of a tie's ring of 16 ties, which every tie
// makes at every commit that wakes it (16 x 16 in a first placement of 16
// members):
//
//	go test -run '^$' -bench TieRing ./store/sqlitestore/
func BenchmarkTieRing(b *testing.B) {
	ctx := b.Context()
	s, err := Open(ctx, "sqlite://"+filepath.Join(b.TempDir(), "herd.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	var ties []*tie
	for i := range 16 {
		sess, err := s.OpenSession(ctx, "g", fmt.Sprintf("m%d", i), 1, time.Hour)
		if err != nil {
			b.Fatal(err)
		}
		t, err := s.TieSession(ctx, "g", sess, store.TieConfig{TTL: time.Hour, Grace: time.Second})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { t.Close() })
		ties = append(ties, t.(*tie))
	}
	for b.Loop() {
		if gone, _ := ties[0].follow(ctx); gone != nil {
			b.Fatal(gone)
		}
	}
}
