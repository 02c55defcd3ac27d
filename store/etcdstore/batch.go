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
// their pending keys in later, sequenced in the background once all are
// written (see seqlater.go), whatever the error.
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
	if len(later.keys) > 0 {
		s.sequenceLater(g, later.keys, nil, 0)
	}
	return first
}
