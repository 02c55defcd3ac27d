// Command consumer reads Redis streams, one per partition, with a fleet of
// copies of itself: herd gives each stream to exactly one running copy,
// which prints its entries and resumes after the last entry the previous
// owner recorded. Stop a copy with Ctrl-C or kill -TERM: it hands its
// streams over to the others in milliseconds. Start and stop copies while
// they run, and watch the streams move.
//
//	go run ./examples/consumer -produce 1000   # adds 1,000 entries, then consumes
//	go run ./examples/consumer                 # in other terminals
//
// It needs Redis (-redis, default redis://127.0.0.1:6379/0) and uses only
// keys that start with -prefix (default herd-example): the streams
// <prefix>:events:0 .. <prefix>:events:7, and herd's own records.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/redisstore"
)

func main() {
	redisURL := flag.String("redis", "redis://127.0.0.1:6379/0", "the Redis server of the streams and of herd's records")
	prefix := flag.String("prefix", "herd-example", "the start of every key this program uses")
	produce := flag.Int("produce", 0, "add this many entries to the streams before consuming")
	flag.Parse()
	if err := run(*redisURL, *prefix, *produce); err != nil {
		fmt.Fprintln(os.Stderr, "consumer:", err)
		os.Exit(1)
	}
}

func run(redisURL, prefix string, produce int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := redisstore.Open(ctx, redisURL, redisstore.WithPrefix(prefix))
	if err != nil {
		return err
	}
	defer st.Close()
	opt, err := redis.ParseURL(redisURL) // redisstore.Open has checked it
	if err != nil {
		return err
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	events := &Streams{rdb: rdb, prefix: prefix + ":events:"}
	if err := events.Produce(ctx, produce, 8); err != nil {
		return err
	}
	return consume(st, events)
}

// README:begin
// consume runs this process's share of the partitions, one Redis stream
// each, until SIGTERM or Ctrl-C; then it hands them over and returns.
func consume(st store.Store, events *Streams) error {
	// SIGTERM (kill, docker stop, Kubernetes) and Ctrl-C mean: leave
	// gracefully. Join gets a context of its own, as cancelling Join's
	// context is a crash (nothing is handed over; others wait SessionTTL).
	sig, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	m, err := herd.Join(context.Background(), st, herd.Config{
		Group:      "events",
		Partitions: herd.Numbered(8), // "0" .. "7"; nil: follow the set already stored
		Handler: func(c *herd.Claim) error {
			after := string(c.LastCheckpoint()) // the last entry the previous owner marked
			for {
				entries, err := events.Read(c.Context(), c.Partition, after)
				if c.Context().Err() != nil {
					return nil // handed off or lost: herd writes the last Mark, then releases
				}
				if err != nil {
					return err // logged; the handler is started again after Config.RestartDelay
				}
				for _, e := range entries {
					fmt.Printf("partition %s: %s %v\n", c.Partition, e.ID, e.Values)
					after = e.ID
					// Cheap: kept in memory, written every CheckpointInterval and on handoff.
					if err := c.Mark([]byte(after)); err != nil {
						return err // herd.ErrNotOwner: the partition has another owner now
					}
				}
			}
		},
	})
	if err != nil {
		return err
	}
	<-sig.Done()
	stop() // from now on a second signal kills the process
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return m.Leave(ctx) // returns once every handler has returned and its partition is released
}

// README:end
