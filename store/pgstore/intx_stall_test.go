package pgstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/herdhq/herd/store"
)

// stallInTx starts an InTx of partition p by st at epoch that stops in the
// middle of reading a large result (what a process stopped by SIGSTOP
// looks like to the server: its backend is active, blocked sending, so no
// idle timeout ends it) until release is closed. It returns when the
// function is inside, and the channel InTx's error comes on.
func stallInTx(t *testing.T, st *Store, group, p string, epoch uint64, release <-chan struct{}) <-chan error {
	t.Helper()
	inside := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- st.InTx(context.Background(), Fence{Group: group, Partition: p, Epoch: epoch}, func(tx pgx.Tx, last []byte) ([]byte, error) {
			rows, err := tx.Query(context.Background(), "SELECT repeat('x', 1000) FROM generate_series(1, 2000000)")
			if err != nil {
				close(inside)
				return nil, err
			}
			defer rows.Close()
			rows.Next()
			close(inside)
			<-release
			for rows.Next() {
			}
			if err := rows.Err(); err != nil {
				return nil, err
			}
			return []byte("stalled"), nil
		})
	}()
	select {
	case <-inside:
	case <-time.After(30 * time.Second):
		t.Fatal("the stalled InTx's function did not start within 30s")
	}
	return done
}

// A member stopped inside InTx (its backend active, blocked sending the
// rows its function stopped reading) holds its partition's record lock.
// Once its session has expired, the rest of the group carries on: another
// member's claim of that partition ends the stalled transaction and takes
// the partition over, a third member opens its session, and nothing of
// the stalled transaction is written.
func TestInTxStalledMemberDoesNotWedgeGroup(t *testing.T) {
	s := openTest(t)
	stalled := openIn(t, s.schema) // the stopped member's own store
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const group = "tx-stall"
	a, err := stalled.OpenSession(ctx, group, "a", 1, 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	oa, err := store.Claim(ctx, stalled, group, "p", a)
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	defer close(release)
	done := stallInTx(t, stalled, group, "p", oa.Epoch, release)
	waitFor(t, 10*time.Second, "the stalled backend to block sending", func() bool {
		var n int
		err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE state = 'active' AND wait_event = 'ClientWrite' AND query LIKE '%generate_series(1, 2000000)%'`).Scan(&n)
		return err == nil && n > 0
	})
	waitFor(t, 10*time.Second, "a's session to expire", func() bool {
		snap, err := s.Snapshot(ctx, group)
		return err == nil && len(snap.Sessions) == 0
	})

	// The bound: each call gets 5s, far more than it needs when nothing
	// waits for the stalled transaction.
	bounded := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, 5*time.Second) }
	c1, cancel1 := bounded()
	defer cancel1()
	b, err := s.OpenSession(c1, group, "b", 1, time.Minute)
	if err != nil {
		t.Fatalf("b's OpenSession: %v", err)
	}
	claimed := make(chan error, 1)
	var ob store.Ownership
	go func() {
		c, cancel := bounded()
		defer cancel()
		var err error
		ob, err = store.Claim(c, s, group, "p", b)
		claimed <- err
	}()
	c2, cancel2 := bounded()
	defer cancel2()
	if _, err := s.OpenSession(c2, group, "c", 1, time.Minute); err != nil {
		t.Fatalf("c's OpenSession while b claims the stalled partition: %v", err)
	}
	if err := <-claimed; err != nil {
		t.Fatalf("b's claim of the stalled member's partition: %v", err)
	}
	if ob.Epoch <= oa.Epoch || ob.Checkpoint != nil {
		t.Fatalf("b's claim: %+v; want a new epoch and no checkpoint", ob)
	}
	c3, cancel3 := bounded()
	defer cancel3()
	if err := s.Checkpoint(c3, group, "p", ob.Epoch, []byte("b")); err != nil {
		t.Fatalf("b's checkpoint: %v", err)
	}
	release <- struct{}{}
	if err := <-done; err == nil || errors.Is(err, store.ErrInvalid) {
		t.Fatalf("the stalled InTx, its backend ended: %v; want an error saying nothing was written", err)
	} else {
		t.Logf("the stalled InTx: %v", err)
	}
	recs, err := s.Records(ctx, group, []string{"p"})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || string(recs[0].Checkpoint) != "b" || recs[0].Epoch != ob.Epoch {
		t.Fatalf("record after the takeover: %+v; want b's epoch %d and checkpoint", recs, ob.Epoch)
	}
}

// Checkpoint and the start of another InTx of a partition whose record an
// open InTx holds wait for it at most the store's lock timeout, then fail
// with store.ErrUnavailable, writing nothing; the function's own
// statements keep the connection's lock_timeout.
func TestRecordLockWaitBounded(t *testing.T) {
	s := openTest(t, WithTxIdleTimeout(time.Minute), WithLockTimeout(200*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const group = "tx-lock"
	a, err := s.OpenSession(ctx, group, "a", 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	oa, err := store.Claim(ctx, s, group, "p", a)
	if err != nil {
		t.Fatal(err)
	}
	f := Fence{Group: group, Partition: "p", Epoch: oa.Epoch}
	inside, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	var fnTimeout string
	go func() {
		done <- s.InTx(ctx, f, func(tx pgx.Tx, last []byte) ([]byte, error) {
			err := tx.QueryRow(ctx, "SELECT current_setting('lock_timeout')").Scan(&fnTimeout)
			close(inside)
			<-release
			return []byte("intx"), err
		})
	}()
	<-inside
	c, ccancel := context.WithTimeout(ctx, 20*time.Second)
	defer ccancel()
	err = s.Checkpoint(c, group, "p", oa.Epoch, []byte("cp"))
	if !errors.Is(err, store.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Checkpoint while an InTx holds the record: %v; want ErrUnavailable after the lock timeout", err)
	}
	err = s.InTx(c, f, func(pgx.Tx, []byte) ([]byte, error) { return []byte("second"), nil })
	if !errors.Is(err, store.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a second InTx while one holds the record: %v; want ErrUnavailable after the lock timeout", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("the first InTx: %v", err)
	}
	if fnTimeout != "0" {
		t.Errorf("lock_timeout in the function: %q; want the connection's own (0)", fnTimeout)
	}
	recs, err := s.Records(ctx, group, []string{"p"})
	if err != nil || len(recs) != 1 || string(recs[0].Checkpoint) != "intx" {
		t.Fatalf("record: %+v, %v; want the first InTx's checkpoint", recs, err)
	}
}
