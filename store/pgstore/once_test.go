package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/internal/pgtest"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/pgstore"
)

// Members process items 1..items of each partition, one InTx per item
// (insert the item, checkpoint it), while the fleet changes: members join,
// one leaves, one crashes. Every item ends up written exactly once: the
// table's primary key would reject a second write, and a member that lost
// a partition cannot commit. Progress is rationed with tokens, so that
// each change of the fleet happens while items remain.
func TestInTxEffectivelyOnceAcrossHandoffs(t *testing.T) {
	pgtest.Need(t)
	schema := pgtest.Schema(t)
	url := pgtest.WithOptions(pgtest.URL(), "schema", schema, "pool_max_conns", "4")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const (
		group = "once"
		parts = 8
		items = 100
	)
	open := func() *pgstore.Store {
		st, err := pgstore.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	setup := open()
	pgtest.Exec(t, fmt.Sprintf(`CREATE TABLE %q.done (part text, item integer, PRIMARY KEY (part, item))`, schema))
	table := fmt.Sprintf(`%q.done`, schema)
	count := func() int64 {
		var n int64
		if err := setup.Pool().QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	tokens := make(chan struct{}, parts*items)
	handler := func(st *pgstore.Store) herd.Handler {
		return func(c *herd.Claim) error {
			fence := pgstore.Fence{Group: group, Partition: c.Partition, Epoch: c.Epoch}
			for {
				select {
				case <-tokens:
				case <-c.Context().Done():
					return nil
				}
				done := false
				err := st.InTx(c.Context(), fence, func(tx pgx.Tx, last []byte) ([]byte, error) {
					n, _ := strconv.Atoi(string(last))
					if n >= items {
						done = true
						return nil, nil
					}
					if _, err := tx.Exec(c.Context(), "INSERT INTO "+table+" VALUES ($1, $2)", c.Partition, n+1); err != nil {
						return nil, err
					}
					return []byte(strconv.Itoa(n + 1)), nil
				})
				if err != nil || done {
					tokens <- struct{}{} // not used: give it back
				}
				var pe *pgconn.PgError
				switch {
				case errors.As(err, &pe) && pe.Code == "23505":
					t.Errorf("partition %s at epoch %d wrote an item a second time: %v", c.Partition, c.Epoch, err)
					return nil
				case errors.Is(err, store.ErrNotOwner) || c.Context().Err() != nil:
					return nil
				case err != nil:
					return err
				case done:
					<-c.Context().Done()
					return nil
				}
			}
		}
	}
	type running struct {
		m      *herd.Member
		cancel context.CancelFunc
	}
	join := func(id string) running {
		st := open()
		mctx, mcancel := context.WithCancel(ctx)
		m, err := herd.Join(mctx, st, herd.Config{
			Group: group, Member: id, Partitions: herd.Numbered(parts), Handler: handler(st),
			SessionTTL: time.Second, Logger: slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatal(err)
		}
		return running{m, mcancel}
	}
	fed := 0
	feed := func(n int) {
		for range n {
			tokens <- struct{}{}
		}
		fed += n
		deadline := time.Now().Add(30 * time.Second)
		for count() < int64(fed) {
			if time.Now().After(deadline) {
				t.Fatalf("%d items written of %d fed within 30s", count(), fed)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	m1 := join("m1")
	feed(150)
	m2 := join("m2")
	feed(150)
	m3 := join("m3")
	feed(150)
	if err := m1.m.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	feed(150)
	m2.cancel() // a crash: its partitions move after its session expires
	<-m2.m.Done()
	feed(parts*items - fed)

	if err := m3.m.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	m1.cancel()
	m3.cancel()
	if got := count(); got != parts*items {
		t.Fatalf("%d items written; want %d", got, parts*items)
	}
	var distinct int64
	if err := setup.Pool().QueryRow(ctx, "SELECT count(*) FROM (SELECT DISTINCT part, item FROM "+table+") d WHERE item BETWEEN 1 AND $1", items).Scan(&distinct); err != nil {
		t.Fatal(err)
	}
	if distinct != parts*items {
		t.Fatalf("%d distinct items in range; want %d", distinct, parts*items)
	}
	ids := make([]string, parts)
	for i := range ids {
		ids[i] = strconv.Itoa(i)
	}
	recs, err := setup.Records(ctx, group, ids)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if string(r.Checkpoint) != strconv.Itoa(items) {
			t.Errorf("partition %s's checkpoint is %q; want %d", r.Partition, r.Checkpoint, items)
		}
	}
}
