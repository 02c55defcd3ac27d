package herd

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/memstore"
)

// releaseCalls is a store that records the size and time of every
// ReleaseBatch call.
type releaseCalls struct {
	store.Store
	mu    sync.Mutex
	sizes []int
	at    []time.Time
}

func (s *releaseCalls) ReleaseBatch(ctx context.Context, group, session string, held []store.Ownership) ([]error, error) {
	s.mu.Lock()
	s.sizes, s.at = append(s.sizes, len(held)), append(s.at, time.Now())
	s.mu.Unlock()
	return s.Store.ReleaseBatch(ctx, group, session, held)
}

// The partitions one plan hands off are released in one call, although
// their handlers return one after the other; a handler slow to return
// holds the others back releaseGather at most.
func TestHandoffReleasedTogether(t *testing.T) {
	for _, slow := range []bool{false, true} {
		t.Run("slow="+strconv.FormatBool(slow), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				shared := memstore.New()
				st := &releaseCalls{Store: shared}
				var first atomic.Bool
				var firstCancel atomic.Int64 // unix nanoseconds
				handler := func(c *Claim) error {
					<-c.Context().Done()
					if first.CompareAndSwap(false, true) {
						firstCancel.Store(time.Now().UnixNano())
						if slow {
							time.Sleep(5 * time.Second)
							return nil
						}
					}
					// Handlers return over 9 ms, one after the other.
					n, _ := strconv.Atoi(c.Partition)
					time.Sleep(time.Duration(n%10) * time.Millisecond)
					return nil
				}
				cfg := Config{Group: "g", Member: "a", Partitions: Numbered(40), Handler: handler}
				a, err := Join(t.Context(), st, cfg)
				if err != nil {
					t.Fatal(err)
				}
				defer a.Leave(context.Background())
				time.Sleep(2 * time.Second)
				cfg.Member = "b"
				b, err := Join(t.Context(), shared, cfg)
				if err != nil {
					t.Fatal(err)
				}
				defer b.Leave(context.Background())
				time.Sleep(10 * time.Second)
				if got := len(b.Owned()); got != 20 {
					t.Fatalf("b runs %d partitions, want 20", got)
				}
				st.mu.Lock()
				sizes, at := st.sizes, st.at
				st.mu.Unlock()
				want := []int{20}
				if slow {
					want = []int{19, 1}
				}
				if !slices.Equal(sizes, want) {
					t.Fatalf("release calls of %v partitions, want %v", sizes, want)
				}
				if d := at[0].Sub(time.Unix(0, firstCancel.Load())); slow && d > releaseGather+10*time.Millisecond {
					t.Errorf("the first release was sent %v after the first handler was cancelled: held back for the slow one", d)
				}
			})
		})
	}
}
