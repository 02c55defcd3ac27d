package pgstore

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/herdhq/herd/store"
)

// results reads the items the test's transactions wrote.
func results(t *testing.T, s *Store, table string) []int {
	t.Helper()
	rows, err := s.Pool().Query(context.Background(), "SELECT item FROM "+table+" ORDER BY item")
	if err != nil {
		t.Fatal(err)
	}
	items, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		t.Fatal(err)
	}
	return items
}

// write is an InTx function that inserts item and makes it the checkpoint,
// after checking that last is the item before it.
func write(t *testing.T, table string, item int, hook func()) func(pgx.Tx, []byte) ([]byte, error) {
	return func(tx pgx.Tx, last []byte) ([]byte, error) {
		if want := strconv.Itoa(item - 1); item > 1 && string(last) != want {
			t.Errorf("InTx for item %d got last %q; want %q", item, last, want)
		}
		if _, err := tx.Exec(context.Background(), "INSERT INTO "+table+" (item) VALUES ($1)", item); err != nil {
			return nil, err
		}
		if hook != nil {
			hook()
		}
		return []byte(strconv.Itoa(item)), nil
	}
}

// InTx commits a transaction's writes with the checkpoint only while the
// fence holds: a stale epoch's writes, and those of a member whose session
// ended during the transaction, are rolled back with it.
func TestInTxFenced(t *testing.T) {
	s := openTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	table := s.qschema + ".items"
	admin(t, "CREATE TABLE "+table+" (item integer PRIMARY KEY)")
	const group = "tx"
	a, err := s.OpenSession(ctx, group, "a", 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	oa, err := store.Claim(ctx, s, group, "p", a)
	if err != nil {
		t.Fatal(err)
	}
	fa := Fence{Group: group, Partition: "p", Epoch: oa.Epoch}
	if err := s.InTx(ctx, fa, write(t, table, 1, nil)); err != nil {
		t.Fatalf("InTx by the owner: %v", err)
	}

	// b takes the partition over; a's next transaction is rolled back.
	if err := s.CloseSession(ctx, group, a); err != nil {
		t.Fatal(err)
	}
	b, err := s.OpenSession(ctx, group, "b", 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	ob, err := store.Claim(ctx, s, group, "p", b)
	if err != nil {
		t.Fatal(err)
	}
	if string(ob.Checkpoint) != "1" {
		t.Fatalf("Claim after the owner's transaction returned checkpoint %q; want \"1\"", ob.Checkpoint)
	}
	err = s.InTx(ctx, fa, write(t, table, 2, nil))
	if !errors.Is(err, store.ErrNotOwner) {
		t.Fatalf("InTx at the stale epoch %d: %v; want ErrNotOwner", fa.Epoch, err)
	}
	if got := results(t, s, table); !slices.Equal(got, []int{1}) {
		t.Fatalf("after a stale transaction the items are %v; want [1]: its write must be rolled back", got)
	}

	fb := Fence{Group: group, Partition: "p", Epoch: ob.Epoch}
	if err := s.InTx(ctx, fb, write(t, table, 2, nil)); err != nil {
		t.Fatalf("InTx by the new owner: %v", err)
	}
	// The session ends while the transaction runs: rolled back at the end.
	err = s.InTx(ctx, fb, write(t, table, 3, func() {
		if err := s.CloseSession(ctx, group, b); err != nil {
			t.Error(err)
		}
	}))
	if !errors.Is(err, store.ErrNotOwner) {
		t.Fatalf("InTx whose session ended during it: %v; want ErrNotOwner", err)
	}
	if got := results(t, s, table); !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("items %v; want [1 2]", got)
	}
	// A function's own error rolls back and is returned as it is.
	c, err := s.OpenSession(ctx, group, "c", 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	oc, err := store.Claim(ctx, s, group, "p", c)
	if err != nil {
		t.Fatal(err)
	}
	if string(oc.Checkpoint) != "2" {
		t.Fatalf("checkpoint %q; want \"2\"", oc.Checkpoint)
	}
	mine := errors.New("mine")
	err = s.InTx(ctx, Fence{Group: group, Partition: "p", Epoch: oc.Epoch}, func(tx pgx.Tx, last []byte) ([]byte, error) {
		if _, err := tx.Exec(ctx, "INSERT INTO "+table+" (item) VALUES (3)"); err != nil {
			return nil, err
		}
		return nil, mine
	})
	if err != mine {
		t.Fatalf("InTx whose function failed: %v; want its error", err)
	}
	if got := results(t, s, table); !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("items %v; want [1 2]", got)
	}
	// The context ends inside the transaction, before the commit: the
	// error says nothing was written, and nothing was.
	cctx, ccancel := context.WithCancel(ctx)
	err = s.InTx(cctx, Fence{Group: group, Partition: "p", Epoch: oc.Epoch}, write(t, table, 3, ccancel))
	if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "rolled back, nothing written") {
		t.Fatalf("InTx whose context ended before the commit: %v; want ErrUnavailable saying nothing was written", err)
	}
	if got := results(t, s, table); !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("items %v; want [1 2]", got)
	}
	if err := s.InTx(ctx, Fence{Group: group, Partition: "p", Epoch: 0}, write(t, table, 3, nil)); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("InTx at epoch 0: %v; want ErrInvalid", err)
	}
}

// handoverSetup makes the items table, and in group a session a that holds
// partition p (record oa) and a session b to take it over.
func handoverSetup(ctx context.Context, t *testing.T, s *Store, group string) (table, a string, oa store.Ownership, b string) {
	t.Helper()
	table = s.qschema + ".items"
	admin(t, "CREATE TABLE "+table+" (item integer PRIMARY KEY)")
	a, err := s.OpenSession(ctx, group, "a", 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if oa, err = store.Claim(ctx, s, group, "p", a); err != nil {
		t.Fatal(err)
	}
	if b, err = s.OpenSession(ctx, group, "b", 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	return table, a, oa, b
}

// A claim of the partition by another member never waits for a
// transaction in progress: while the owner's session lives it is refused
// at once (ErrClaimed); once the session has ended, the claim ends the
// transaction (which could not commit anyway) and takes the partition
// over, and nothing of the transaction is written.
func TestInTxClaimEndsTransactionOfEndedSession(t *testing.T) {
	// The transaction waits (idle) for the test: a bound longer than it.
	s := openTest(t, WithTxIdleTimeout(time.Minute))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const group = "tx-wait"
	table, a, oa, b := handoverSetup(ctx, t, s, group)
	inside, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	done := make(chan error, 1)
	go func() {
		done <- s.InTx(ctx, Fence{Group: group, Partition: "p", Epoch: oa.Epoch}, write(t, table, 1, func() {
			close(inside)
			<-release
		}))
	}()
	<-inside
	cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
	defer ccancel()
	if _, err := store.Claim(cctx, s, group, "p", b); !errors.Is(err, store.ErrClaimed) {
		t.Fatalf("b's claim while a's session lives and its transaction holds the record: %v; want ErrClaimed at once", err)
	}
	// a's session ends while its transaction holds the record.
	if err := s.CloseSession(ctx, group, a); err != nil {
		t.Fatal(err)
	}
	o, err := store.Claim(cctx, s, group, "p", b)
	if err != nil {
		t.Fatalf("b's claim after a's session ended: %v", err)
	}
	if o.Epoch <= oa.Epoch || o.Checkpoint != nil {
		t.Fatalf("b's claim: %+v; want a new epoch and no checkpoint", o)
	}
	release <- struct{}{}
	if err := <-done; err == nil {
		t.Fatal("InTx whose transaction the claim ended: nil error")
	}
	if got := results(t, s, table); len(got) != 0 {
		t.Fatalf("items %v; want none", got)
	}
}

// A transaction whose process stops in the middle (here: its function
// waits, the server idle in the transaction) is ended by the server after
// the idle bound, so its lock on the record does not hold up the group: a
// claim of the partition after its session ended goes through long before
// the function returns, and nothing of the transaction is written.
func TestInTxIdleBound(t *testing.T) {
	s := openTest(t, WithTxIdleTimeout(200*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const group = "tx-idle"
	table, a, oa, b := handoverSetup(ctx, t, s, group)
	const stopped = 5 * time.Second
	inside := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- s.InTx(ctx, Fence{Group: group, Partition: "p", Epoch: oa.Epoch}, write(t, table, 1, func() {
			close(inside)
			time.Sleep(stopped) // the process stopped mid-transaction
		}))
	}()
	<-inside
	began := time.Now()
	if err := s.CloseSession(ctx, group, a); err != nil {
		t.Fatal(err)
	}
	o, err := store.Claim(ctx, s, group, "p", b)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(began); d >= stopped {
		t.Fatalf("b's claim took %v: it waited for the stopped transaction", d)
	}
	if o.Epoch <= oa.Epoch || o.Checkpoint != nil {
		t.Fatalf("b's claim: %+v; want a new epoch and no checkpoint", o)
	}
	if err := <-done; err == nil {
		t.Fatal("InTx ended by the server returned no error")
	}
	if got := results(t, s, table); len(got) != 0 {
		t.Fatalf("items %v; want none", got)
	}
}
