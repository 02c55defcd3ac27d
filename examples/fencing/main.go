// Command fencing shows how a handler fences its writes to another system
// with Claim.Epoch, so that a handler that lost its partition, but has not
// stopped yet, cannot overwrite the work of the partition's next owner.
//
// herd fences its own checkpoints. Writes to your systems need the same
// guard: store the epoch next to the data and write only if yours is not
// older, in one atomic step (a conditional UPDATE, a compare-and-set, a
// Lua script). Sink below is such a system, in memory.
//
// Here member a owns both partitions of a group; member b joins and
// takes one over. a's handler of that partition is slow to stop (it finishes
// its batch after its context is cancelled), so with ForceHandoff the
// partition is released after MaxShutdown and b runs it while a's handler
// still does. a's late write is refused by the sink. It runs on the
// in-process store:
//
//	go run ./examples/fencing
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/store/memstore"
)

// Sink is another system the handlers write to: one row per partition,
// with the epoch of the write that made it.
type Sink struct {
	mu   sync.Mutex
	rows map[string]row
}

type row struct {
	value string
	epoch uint64
}

// ErrStale: a write's epoch is older than the row's.
var ErrStale = errors.New("stale epoch: the partition has a newer owner")

// Write sets partition's row to value if epoch is at least the row's, in
// one step, as would
//
//	UPDATE rows SET value = $3, epoch = $2 WHERE partition = $1 AND epoch <= $2
func (s *Sink) Write(partition string, epoch uint64, value string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.rows[partition]; ok && r.epoch > epoch {
		return fmt.Errorf("write %q to partition %s: %w", value, partition, ErrStale)
	}
	s.rows[partition] = row{value, epoch}
	return nil
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "fencing:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx := context.Background()
	st := memstore.New()
	sink := &Sink{rows: map[string]row{}}
	bWrote := map[string]chan struct{}{"0": make(chan struct{}), "1": make(chan struct{})}
	started := make(chan struct{}, 2)
	late := make(chan error, 1)
	var leaving atomic.Bool

	a, err := herd.Join(ctx, st, herd.Config{
		Group: "fencing", Member: "a", Partitions: herd.Numbered(2),
		ForceHandoff: true, MaxShutdown: 100 * time.Millisecond,
		Handler: func(c *herd.Claim) error {
			if err := sink.Write(c.Partition, c.Epoch, "a"); err != nil {
				return err
			}
			started <- struct{}{}
			<-c.Context().Done()
			if leaving.Load() {
				return nil
			}
			<-bWrote[c.Partition] // still busy with its batch: b has taken over meanwhile
			late <- sink.Write(c.Partition, c.Epoch, "a, late")
			return nil
		},
	})
	if err != nil {
		return err
	}
	<-started
	<-started
	fmt.Println("a owns both partitions and has written to both")

	b, err := herd.Join(ctx, st, herd.Config{
		Group: "fencing", Member: "b",
		Handler: func(c *herd.Claim) error {
			if err := sink.Write(c.Partition, c.Epoch, "b"); err != nil {
				return err
			}
			fmt.Println("b took one over, at a newer epoch, and wrote to it")
			close(bWrote[c.Partition])
			<-c.Context().Done()
			return nil
		},
	})
	if err != nil {
		return err
	}
	err = <-late
	if !errors.Is(err, ErrStale) {
		return fmt.Errorf("the sink did not refuse a stale write: %v", err)
	}
	fmt.Printf("a's late write to the partition it lost was refused: %v\n", err)

	leaving.Store(true)
	if err := a.Leave(ctx); err != nil {
		return err
	}
	if err := b.Leave(ctx); err != nil {
		return err
	}
	fmt.Printf("sink: partition 0 = %q, partition 1 = %q (one each)\n", sink.rows["0"].value, sink.rows["1"].value)
	return nil
}
