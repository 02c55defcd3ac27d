package sqlitestore_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/herdhq/herd/store/storetest"
)

// A tie cut by another store (here the backstop of a store without ties,
// before any tie watched it) is ended after its grace by the watch of a
// tie that finds it cut in the ring, even after its session renewed: no
// one has to call ExpireSessions again.
func TestTieCutByOthersEnded(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "herd.db")
	sa, sb, sc := open(t, path), open(t, path), open(t, path)
	a, tieA := tied(ctx, t, sa, "g", "a")
	v := storetest.Version(ctx, t, sc, "g")
	_ = tieA.Close()
	if _, err := sc.ExpireSessions(ctx, "g"); err != nil { // cuts a
		t.Fatal(err)
	}
	if _, err := sa.KeepAlive(ctx, "g", a, tieTTL); err != nil {
		t.Fatalf("KeepAlive of a right after the cut: %v", err)
	}
	tied(ctx, t, sb, "g", "b") // its watch finds a cut in the ring
	at := time.Now()
	ended := storetest.WaitExpired(ctx, t, sc, "g", v, a, 5*time.Second)
	t.Logf("a's session, cut by another store, ended %v after b tied", ended.Sub(at).Round(time.Millisecond))
}
