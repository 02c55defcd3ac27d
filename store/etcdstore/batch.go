package etcdstore

import (
	"context"
	"sync"
)

// parallelChunks is how many transactions of one batch run at once: the
// chunks of a batch touch different records, so they do not conflict,
// and the cluster commits them in the same Raft round.
const parallelChunks = 8

// inChunks runs chunk on [from, to) for every size partitions of n,
// parallelChunks at once, and returns the first error. Its writes leave
// their pending keys in later, sequenced once all are written, whatever the
// error: in the background for a batch of one transaction (see
// seqlater.go).
func (s *Store) inChunks(ctx context.Context, g string, n, size int, chunk func(from, to int, later *pendingKeys) error) error {
	later := &pendingKeys{}
	sem := make(chan struct{}, parallelChunks)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for from := 0; from < n; from += size {
		to := min(from+size, n)
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := chunk(from, to, later); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	switch {
	case len(later.keys) == 0:
	case n > size:
		// A batch of many transactions (a placement's) waits for its
		// sequencing: its next batch would otherwise find more pending
		// keys each time, and every read of the log lists them all (on 16
		// x 100,000, 37,000 partitions placed in 105 s against all of
		// them in 43 s).
		s.sequence(ctx, g, later.keys, nil, 0)
	default:
		s.sequenceLater(g, later.keys, nil, 0)
	}
	return first
}
