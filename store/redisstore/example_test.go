package redisstore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/store/redisstore"
)

// Open a Redis store for a fleet of processes: every member of a group
// uses the same URL and prefix. (Compiled, not run: it needs a server.)
func ExampleOpen() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := redisstore.Open(ctx, "redis://127.0.0.1:6379/0?prefix=myapp")
	if err != nil {
		fmt.Println(err) // the URL is malformed (ErrInvalid) or the server does not answer (ErrUnavailable)
		return
	}
	defer st.Close()
	m, err := herd.Join(context.Background(), st, herd.Config{
		Group:      "orders",
		Partitions: herd.Numbered(32),
		Handler: func(c *herd.Claim) error {
			<-c.Context().Done()
			return nil
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Leave(context.Background())
}
