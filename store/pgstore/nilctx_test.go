package pgstore

import (
	"context"
	"testing"

	"github.com/herdhq/herd/store/storetest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Open, New and InTx with a nil context fail with ErrInvalid and do not
// panic (the calls of the store contract are the conformance suite's
// context/nil).
func TestNilContext(t *testing.T) {
	s := openTest(t)
	schema := newSchema(t)
	pool, err := pgxpool.New(t.Context(), withOptions(testURL(), "schema", schema))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	var nilCtx context.Context
	calls := map[string]func() error{
		"Open": func() error {
			o, err := Open(nilCtx, withOptions(testURL(), "schema", schema))
			if err == nil {
				_ = o.Close()
			}
			return err
		},
		"New": func() error {
			o, err := New(nilCtx, pool)
			if err == nil {
				_ = o.Close()
			}
			return err
		},
		"InTx": func() error {
			return s.InTx(nilCtx, Fence{Group: "g", Partition: "p", Epoch: 1},
				func(pgx.Tx, []byte) ([]byte, error) { return nil, nil })
		},
	}
	storetest.ExpectInvalid(t, "with a nil context", calls)
}
