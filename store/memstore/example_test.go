package memstore_test

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/store/memstore"
)

// The in-process store lets members of one process (tests, demos) share a
// group with no server.
func ExampleNew() {
	ctx := context.Background()
	st := memstore.New()
	started := make(chan string)
	m, err := herd.Join(ctx, st, herd.Config{
		Group: "g", Partitions: herd.Numbered(1), Logger: slog.New(slog.DiscardHandler),
		Handler: func(c *herd.Claim) error {
			started <- c.Partition
			<-c.Context().Done()
			return nil
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("running partition", <-started)
	if err := m.Leave(ctx); err != nil {
		fmt.Println(err)
	}
	// Output: running partition 0
}
