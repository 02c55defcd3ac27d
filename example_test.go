package herd_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/store/memstore"
)

// quiet keeps the examples' output to what they print.
var quiet = slog.New(slog.DiscardHandler)

// collect receives n lines and prints them sorted (handlers run at once).
func collect(lines <-chan string, n int) {
	got := make([]string, n)
	for i := range got {
		got[i] = <-lines
	}
	slices.Sort(got)
	for _, l := range got {
		fmt.Println(l)
	}
}

// Two members in turn process items 1..100 of each partition, recording
// progress with Mark. The first leaves gracefully; its last marks are
// written before its partitions are released, so the second resumes
// exactly there.
func ExampleJoin() {
	ctx := context.Background()
	st := memstore.New() // in one process; redisstore.Open for a fleet
	lines := make(chan string)
	handler := func(c *herd.Claim) error {
		pos := 0
		if cp := c.LastCheckpoint(); cp != nil {
			pos, _ = strconv.Atoi(string(cp))
		}
		from := pos
		for pos < 100 && c.Context().Err() == nil {
			pos++ // process item pos, then record it
			if err := c.Mark([]byte(strconv.Itoa(pos))); err != nil {
				return err
			}
		}
		lines <- fmt.Sprintf("partition %s: items %d to %d", c.Partition, from+1, pos)
		<-c.Context().Done()
		return nil
	}
	first, err := herd.Join(ctx, st, herd.Config{
		Group: "orders", Member: "first", Partitions: herd.Numbered(2), Handler: handler, Logger: quiet,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	collect(lines, 2)
	if err := first.Leave(ctx); err != nil { // hands over, after writing the last marks
		fmt.Println(err)
		return
	}
	second, err := herd.Join(ctx, st, herd.Config{Group: "orders", Member: "second", Handler: handler, Logger: quiet})
	if err != nil {
		fmt.Println(err)
		return
	}
	collect(lines, 2)
	if err := second.Leave(ctx); err != nil {
		fmt.Println(err)
	}
	// Output:
	// partition 0: items 1 to 100
	// partition 1: items 1 to 100
	// partition 0: items 101 to 100
	// partition 1: items 101 to 100
}

// A handler fences its writes to another system with the claim's epoch:
// the system keeps the epoch of the last write and refuses an older one,
// in the same atomic step (here a map under a mutex; in SQL,
// "UPDATE ... WHERE partition = $1 AND epoch <= $2").
func ExampleClaim_fencing() {
	var mu sync.Mutex
	rows := map[string]uint64{} // partition -> epoch of its last write
	errStale := errors.New("stale epoch: the partition has a newer owner")
	write := func(c *herd.Claim) error {
		mu.Lock()
		defer mu.Unlock()
		if rows[c.Partition] > c.Epoch {
			return errStale
		}
		rows[c.Partition] = c.Epoch
		return nil
	}

	ctx := context.Background()
	st := memstore.New()
	claims := make(chan *herd.Claim)
	handler := func(c *herd.Claim) error {
		if err := write(c); err != nil {
			return err
		}
		claims <- c
		<-c.Context().Done()
		return nil
	}
	a, err := herd.Join(ctx, st, herd.Config{Group: "g", Member: "a", Partitions: herd.Numbered(1), Handler: handler, Logger: quiet})
	if err != nil {
		fmt.Println(err)
		return
	}
	old := <-claims
	if err := a.Leave(ctx); err != nil {
		fmt.Println(err)
		return
	}
	b, err := herd.Join(ctx, st, herd.Config{Group: "g", Member: "b", Handler: handler, Logger: quiet})
	if err != nil {
		fmt.Println(err)
		return
	}
	now := <-claims
	fmt.Println("new owner's epoch is newer:", now.Epoch > old.Epoch)
	fmt.Println("old owner's late write:", write(old))
	fmt.Println("old owner's late checkpoint refused:", errors.Is(old.Checkpoint(ctx, []byte("x")), herd.ErrNotOwner))
	if err := b.Leave(ctx); err != nil {
		fmt.Println(err)
	}
	// Output:
	// new owner's epoch is newer: true
	// old owner's late write: stale epoch: the partition has a newer owner
	// old owner's late checkpoint refused: true
}
