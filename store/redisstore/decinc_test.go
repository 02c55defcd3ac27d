package redisstore

import (
	"context"
	"math/big"
	"testing"

	"github.com/herdhq/herd/internal/redistest"
)

// TestDecInc: the scripts' dec_inc adds one to a canonical decimal exactly,
// with and without a carry, up to and past the largest uint64.
func TestDecInc(t *testing.T) {
	raw := redistest.Need(t)
	sc := newScript(prelude + "return dec_inc(ARGV[1])")
	for _, in := range []string{"0", "1", "8", "9", "10", "19", "99", "199", "1099", "1764291234567890",
		"1764291234567899", "18446744073709551609", "18446744073709551614", "18446744073709551615", "99999999999999999999"} {
		got, err := sc.Run(context.Background(), raw, nil, in).Text()
		if err != nil {
			t.Fatalf("dec_inc(%s): %v", in, err)
		}
		n, _ := new(big.Int).SetString(in, 10)
		if want := n.Add(n, big.NewInt(1)).String(); got != want {
			t.Errorf("dec_inc(%s) = %s, want %s", in, got, want)
		}
	}
}
