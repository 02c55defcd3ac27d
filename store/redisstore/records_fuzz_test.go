package redisstore

import (
	"testing"

	"github.com/herdhq/herd/store"
)

// FuzzRecords decodes the records script's reply (the server's time, then
// per partition its owners value, checkpoint, epoch time, checkpoint time
// and GivenBack mark; a nil where a key has no field): no panic, no
// negative age, and a record only for a value that decodes, with its
// partition's id (docs/fuzzing.md).
func FuzzRecords(f *testing.F) {
	const s = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	f.Add("5000000", "3:"+s+":m", "state", "3:1000000", "2000000", s, uint8(0))
	f.Add("5000000", "3::", "", "4:1000000", "x", "", uint8(31))
	f.Add("-1", "0:S:m", "", "", "9000000", "bad", uint8(7))
	f.Fuzz(func(t *testing.T, now, owner, ckpt, epochAt, ckptAt, mark string, nils uint8) {
		col := func(i int, v string) []any {
			if nils&(1<<i) != 0 {
				return []any{nil}
			}
			return []any{v}
		}
		res := []any{now, col(0, owner), col(1, ckpt), col(2, epochAt), col(3, ckptAt), col(4, mark)}
		rs, err := decodeRecords([]string{"p"}, res)
		if err != nil {
			return
		}
		for _, r := range rs {
			_, _, _, bad := parseRecord(owner)
			if r.Partition != "p" || bad != "" || nils&1 != 0 || r.Epoch == 0 || r.Since < 0 || r.CheckpointAge < 0 {
				t.Fatalf("decodeRecords(%q) = %+v", res, r)
			}
			if r.GivenBack != "" && !store.IsSessionID(r.GivenBack) {
				t.Fatalf("decodeRecords(%q): GivenBack %q", res, r.GivenBack)
			}
		}
	})
}
