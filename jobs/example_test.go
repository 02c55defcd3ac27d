package jobs_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/herdhq/herd/jobs"
	"github.com/herdhq/herd/store/memstore"
)

// One member runs a key once per second (on Redis, every member of the
// fleet would share the keys).
func Example() {
	st := memstore.New()
	defer st.Close()
	ran := make(chan jobs.Run, 1)
	s, err := jobs.Start(context.Background(), jobs.Config{
		Store:    st,
		Group:    "aggregate",
		Member:   "worker-1",
		Keys:     []string{"westlafcals"},
		Every:    time.Second,
		NoSpread: true, // due at every whole second
		Run: func(ctx context.Context, r jobs.Run) error {
			select { // aggregate the city's calendars here
			case ran <- r:
			default:
			}
			return nil
		},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	r := <-ran
	fmt.Println("ran", r.Key, "attempt", r.Attempt)
	if err := s.Leave(context.Background()); err != nil {
		fmt.Println(err)
	}
	// Output: ran westlafcals attempt 1
}
