package pgstore

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/herdhq/herd/store"
)

// endSetup makes the items table and a session of group holding p, and
// returns the table, the fence and a function that reads p's checkpoint.
func endSetup(ctx context.Context, t *testing.T, s *Store, group string) (string, Fence, func() string) {
	t.Helper()
	table := s.qschema + "." + strings.ReplaceAll(group, "-", "_")
	admin(t, "CREATE TABLE "+table+" (item integer PRIMARY KEY)")
	a, err := s.OpenSession(ctx, group, "a", 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	o, err := store.Claim(ctx, s, group, "p", a)
	if err != nil {
		t.Fatal(err)
	}
	checkpoint := func() string {
		t.Helper()
		recs, err := s.Records(ctx, group, []string{"p"})
		if err != nil || len(recs) != 1 {
			t.Fatalf("Records: %v %v", recs, err)
		}
		return string(recs[0].Checkpoint)
	}
	return table, Fence{Group: group, Partition: "p", Epoch: o.Epoch}, checkpoint
}

func insert(tx pgx.Tx, table string, item int) error {
	_, err := tx.Exec(context.Background(), "INSERT INTO "+table+" (item) VALUES ($1)", item)
	return err
}

// The function cannot commit InTx's transaction through the handle it
// gets: Commit is refused and the transaction goes on, so what the
// function wrote, before and after, commits with the fence or not at all.
// Here the session ends during the function: nothing is written.
func TestInTxFunctionCannotCommit(t *testing.T) {
	s := openTest(t, WithTxIdleTimeout(time.Minute))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	table, f, _ := endSetup(ctx, t, s, "tx-commit")
	var commitErr, afterErr error
	err := s.InTx(ctx, f, func(tx pgx.Tx, last []byte) ([]byte, error) {
		if err := insert(tx, table, 1); err != nil {
			return nil, err
		}
		commitErr = tx.Commit(ctx)
		afterErr = insert(tx, table, 2)
		// The partition moves on while the function runs.
		admin(t, "DELETE FROM "+s.qschema+".sessions")
		return []byte("2"), nil
	})
	if commitErr == nil || !errors.Is(commitErr, store.ErrInvalid) {
		t.Errorf("Commit through the handle: %v; want a refusal (ErrInvalid)", commitErr)
	}
	if afterErr != nil {
		t.Errorf("a write after the refused Commit: %v; want it in the same transaction", afterErr)
	}
	if !errors.Is(err, store.ErrNotOwner) {
		t.Errorf("InTx whose session ended during the function: %v; want ErrNotOwner", err)
	}
	if got := results(t, s, table); len(got) != 0 {
		t.Fatalf("items %v; want none: the function's Commit committed them without the fence", got)
	}

	// With the fence holding, a function that called Commit still has all
	// of its writes committed, with the checkpoint, by InTx.
	table2, f2, checkpoint := endSetup(ctx, t, s, "tx-commit-2")
	err = s.InTx(ctx, f2, func(tx pgx.Tx, last []byte) ([]byte, error) {
		_ = insert(tx, table2, 1)
		_ = tx.Commit(ctx)
		return []byte("1"), insert(tx, table2, 2)
	})
	if err != nil {
		t.Fatalf("InTx whose function called Commit: %v", err)
	}
	if got := results(t, s, table2); !slices.Equal(got, []int{1, 2}) || checkpoint() != "1" {
		t.Fatalf("items %v, checkpoint %q; want [1 2] and 1", got, checkpoint())
	}
}

// Rollback through the handle rolls the whole call back: later statements
// through the handle fail, InTx writes nothing and says why.
func TestInTxFunctionRollback(t *testing.T) {
	s := openTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	table, f, checkpoint := endSetup(ctx, t, s, "tx-rollback")
	var afterErr error
	err := s.InTx(ctx, f, func(tx pgx.Tx, last []byte) ([]byte, error) {
		_ = insert(tx, table, 1)
		_ = tx.Rollback(ctx)
		afterErr = insert(tx, table, 2)
		return []byte("2"), nil
	})
	if err == nil || !strings.Contains(err.Error(), "Rollback") {
		t.Errorf("InTx whose function called Rollback: %v; want an error saying so", err)
	}
	if afterErr == nil {
		t.Error("a write through the handle after its Rollback succeeded")
	}
	if got := results(t, s, table); len(got) != 0 || checkpoint() != "" {
		t.Fatalf("items %v, checkpoint %q; want none", got, checkpoint())
	}
}

// A transaction ended anyway, by a COMMIT sent through Exec or through the
// connection, is found when the function returns (and, through Exec, at
// once): InTx says what happened and what may have been written, the
// checkpoint is not written, and writes through the handle after the
// COMMIT fail instead of committing on their own.
func TestInTxFunctionEndsTransaction(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(tx pgx.Tx) error
	}{
		{"exec-commit", func(tx pgx.Tx) error { _, err := tx.Exec(context.Background(), "COMMIT"); return err }},
		{"conn-commit", func(tx pgx.Tx) error { _, err := tx.Conn().Exec(context.Background(), "COMMIT"); return err }},
		{"exec-rollback", func(tx pgx.Tx) error { _, err := tx.Exec(context.Background(), "ROLLBACK"); return err }},
		{"commit-and-chain", func(tx pgx.Tx) error { _, err := tx.Exec(context.Background(), "COMMIT AND CHAIN"); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openTest(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			table, f, checkpoint := endSetup(ctx, t, s, "tx-end")
			var afterErr error
			err := s.InTx(ctx, f, func(tx pgx.Tx, last []byte) ([]byte, error) {
				if err := insert(tx, table, 1); err != nil {
					return nil, err
				}
				_ = tc.end(tx)
				afterErr = insert(tx, table, 2)
				return []byte("2"), nil
			})
			t.Logf("InTx: %v", err)
			if err == nil || !strings.Contains(err.Error(), "ended the transaction") || !strings.Contains(err.Error(), "may have been committed") {
				t.Errorf("InTx whose function ended the transaction: %v; want an error saying it and what may have been written", err)
			}
			if checkpoint() != "" {
				t.Errorf("checkpoint %q written after the function ended the transaction; want none", checkpoint())
			}
			got := results(t, s, table)
			if tc.name != "commit-and-chain" && (afterErr == nil || slices.Contains(got, 2)) {
				t.Errorf("a write through the handle after the transaction ended: %v, items %v; want it refused", afterErr, got)
			}
			if tc.name == "commit-and-chain" && slices.Contains(got, 2) {
				t.Errorf("items %v: the write in the chained transaction was committed", got)
			}
		})
	}
}
