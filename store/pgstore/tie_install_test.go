package pgstore

import (
	"context"
	"testing"
	"time"
)

// TestTiesInstalledOnce: a store whose schema holds the ties' SQL of this
// revision ties its sessions without installing it again (the functions'
// rows in pg_proc are not rewritten), as 16 members starting together did
// one after the other.
func TestTiesInstalledOnce(t *testing.T) {
	schema := newSchema(t)
	a, b := openIn(t, schema), openIn(t, schema)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tied(ctx, t, a, "ties-once", "a")
	xmin := func() string {
		t.Helper()
		var x string
		if err := a.pool.QueryRow(ctx, "SELECT xmin::text FROM pg_proc WHERE oid = to_regprocedure($1)", a.qschema+watchSignature).Scan(&x); err != nil {
			t.Fatal(err)
		}
		return x
	}
	before := xmin()
	if !b.tiesInstalled(ctx) {
		t.Fatal("tiesInstalled says no after a store installed the ties' SQL")
	}
	tied(ctx, t, b, "ties-once", "b")
	if after := xmin(); after != before {
		t.Errorf("the second store's tie rewrote watch (xmin %s, then %s); want it left as installed", before, after)
	}
}
