package redisstore

import (
	"testing"
	"time"
)

// TestClaimBatchWrongTypeWritesNothing: a givenback or checkpoints key of
// another type (not what this store writes) fails ClaimBatch before any
// claim is written, so no record is changed without its log entry.
func TestClaimBatchWrongTypeWritesNothing(t *testing.T) {
	s, raw := newTestStore(t)
	ctx := ctxT(t)
	const g = "wrongtype"
	id, err := s.OpenSession(ctx, g, "m", 1, time.Minute)
	must(t, err, "OpenSession")
	k := s.keys(g)
	for _, key := range []string{k.givenback, k.checkpoints} {
		must(t, raw.Set(ctx, key, "not a hash", 0).Err(), "SET "+key)
		if _, err := s.ClaimBatch(ctx, g, id, []string{"p", "q"}); err == nil {
			t.Fatalf("ClaimBatch with %s a string: no error; want the server's WRONGTYPE", key)
		}
		n, err := raw.HLen(ctx, k.owners).Result()
		must(t, err, "HLEN owners")
		if n != 0 {
			t.Fatalf("ClaimBatch with %s a string wrote %d owners records; want none", key, n)
		}
		must(t, raw.Del(ctx, key).Err(), "DEL "+key)
	}
}
