package pgstore_test

import (
	"context"
	"errors"
	"log"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/pgstore"
)

// A fleet spreads the partitions of "orders" over its members through
// PostgreSQL; each handler moves its partition's rows from inbox to done
// and records its progress in the same transaction, fenced by its claim's
// epoch: a row is moved once, whatever the handoffs and crashes.
func ExampleStore_InTx() {
	ctx := context.Background()
	st, err := pgstore.Open(ctx, "postgres://herd@db.internal/app?schema=herd")
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	const group = "orders"
	handler := func(c *herd.Claim) error {
		fence := pgstore.Fence{Group: group, Partition: c.Partition, Epoch: c.Epoch}
		for c.Context().Err() == nil {
			moved := false
			err := st.InTx(c.Context(), fence, func(tx pgx.Tx, last []byte) ([]byte, error) {
				pos, _ := strconv.ParseInt(string(last), 10, 64) // 0 before the first checkpoint
				var id int64
				err := tx.QueryRow(c.Context(),
					`SELECT id FROM inbox WHERE part = $1 AND id > $2 ORDER BY id LIMIT 1`, c.Partition, pos).Scan(&id)
				if errors.Is(err, pgx.ErrNoRows) {
					return nil, nil // nothing new: keep the checkpoint
				}
				if err != nil {
					return nil, err
				}
				if _, err := tx.Exec(c.Context(), `INSERT INTO done SELECT * FROM inbox WHERE id = $1`, id); err != nil {
					return nil, err
				}
				moved = true
				return []byte(strconv.FormatInt(id, 10)), nil
			})
			if errors.Is(err, store.ErrNotOwner) {
				return nil // the partition moved on: nothing of this round was written
			}
			if err != nil && c.Context().Err() == nil {
				return err // herd starts the handler again after a pause
			}
			if !moved {
				select { // the inbox is empty: look again in a second
				case <-time.After(time.Second):
				case <-c.Context().Done():
				}
			}
		}
		return nil
	}
	m, err := herd.Join(ctx, st, herd.Config{Group: group, Partitions: herd.Numbered(16), Handler: handler})
	if err != nil {
		log.Fatal(err)
	}
	<-m.Done()
}
