package redisstore

import (
	"encoding/base64"
	"slices"
	"testing"
	"time"

	"github.com/herdhq/herd/internal/redistest"
	"github.com/herdhq/herd/store"
)

// TestGroupsOwnPrefixOnly: Groups lists the groups under the store's own
// prefix (one with glob characters in it), not those of a store with a
// longer prefix that starts the same, and skips keys under the prefix that
// are not a group's: an unknown key name, a tag that is not base64url, or
// not the canonical encoding, or that decodes to a malformed id.
func TestGroupsOwnPrefixOnly(t *testing.T) {
	raw := redistest.Need(t)
	base := testPrefix(t, raw)
	mine := openWithPrefix(t, base+":*?[x]")
	// The same start, glob characters matched literally: not mine.
	longer := openWithPrefix(t, base+":*?[x]:more")
	other := openWithPrefix(t, base+":abx")
	ctx := ctxT(t)
	for _, g := range []string{"orders", "a:b", "{tag}", "日本"} {
		_, err := mine.OpenSession(ctx, g, "m", 1, time.Minute)
		must(t, err, "OpenSession")
	}
	must(t, setErr(mine.SetPartitions(ctx, "set-only", store.PartitionSet{})), "SetPartitions")
	_, err := longer.OpenSession(ctx, "theirs", "m", 1, time.Minute)
	must(t, err, "OpenSession")
	_, err = other.OpenSession(ctx, "others", "m", 1, time.Minute)
	must(t, err, "OpenSession")
	p := mine.prefix
	b64 := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	for _, k := range []string{
		p + ":{" + b64("unknown-name") + "}:whatever",
		p + ":{not base64!}:sessions",
		p + ":{" + base64.URLEncoding.EncodeToString([]byte("padd")) + "}:sessions",
		p + ":{" + b64("bad\nid") + "}:owners",
		p + ":{}:sessions",
	} {
		must(t, raw.Set(ctx, k, "x", time.Minute).Err(), "SET "+k)
	}
	gs, err := mine.Groups(ctx)
	must(t, err, "Groups")
	want := []string{"a:b", "orders", "set-only", "{tag}", "日本"}
	if !slices.Equal(gs, want) {
		t.Fatalf("Groups = %q; want %q", gs, want)
	}
	must(t, mine.DeleteGroup(ctx, "set-only", false), "DeleteGroup")
	gs, err = mine.Groups(ctx)
	must(t, err, "Groups")
	if slices.Contains(gs, "set-only") {
		t.Fatalf("Groups = %q after DeleteGroup(set-only); want it gone", gs)
	}
	if gs, err := longer.Groups(ctx); err != nil || !slices.Equal(gs, []string{"theirs"}) {
		t.Fatalf("Groups of the longer prefix = %q, %v; want [theirs]", gs, err)
	}
}
