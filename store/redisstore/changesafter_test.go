package redisstore

import (
	"testing"

	"github.com/herdhq/herd/store"
	"github.com/redis/go-redis/v9"
)

// changesAfter counts by the entries' ids what countChangesAfter counts
// value by value, for entries that follow the version without a gap (the
// only ones decodeEntries accepts), from any change of them; and falls
// back to the values for ids that do not decode.
func TestChangesAfterByIDs(t *testing.T) {
	from := store.Version{Seq: 200, Tag: 12345}
	msgs := placementEntries(from)[:5]
	for seq := from.Seq; seq <= from.Seq+500; seq += 7 {
		for _, n := range []int{1, 2, 5} {
			if got, want := changesAfter(msgs[:n], seq), countChangesAfter(msgs[:n], seq); got != want {
				t.Fatalf("after %d, %d entries: %d changes, counted %d", seq, n, got, want)
			}
		}
	}
	bad := append([]redis.XMessage{}, msgs...)
	bad[4].ID = "not-an-id"
	if got, want := changesAfter(bad, from.Seq), countChangesAfter(bad, from.Seq); got != want || got != 400 {
		t.Fatalf("a malformed id: %d changes, counted %d; want 400", got, want)
	}
	if got := changesAfter(nil, from.Seq); got != 0 {
		t.Fatalf("no entries: %d changes", got)
	}
}
