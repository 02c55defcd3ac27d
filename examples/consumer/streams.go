package main

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Streams is one Redis stream per partition, named prefix + partition id.
type Streams struct {
	rdb    *redis.Client
	prefix string
}

// readWait is how long Read waits for an entry. go-redis does not interrupt
// a blocked read when its context is cancelled, so this also bounds how
// long a handoff waits for a handler.
const readWait = 200 * time.Millisecond

// Read returns up to 100 entries of the partition's stream after the entry
// id after ("" for the start), waiting up to readWait for one to arrive.
func (s *Streams) Read(ctx context.Context, partition, after string) ([]redis.XMessage, error) {
	if after == "" {
		after = "0"
	}
	res, err := s.rdb.XRead(ctx, &redis.XReadArgs{
		Streams: []string{s.prefix + partition, after},
		Count:   100,
		Block:   readWait,
	}).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil // nothing new
	}
	if err != nil {
		return nil, err
	}
	return res[0].Messages, nil
}

// Produce appends n entries to the streams of partitions "0" .. partitions-1,
// in turn.
func (s *Streams) Produce(ctx context.Context, n, partitions int) error {
	if n <= 0 {
		return nil
	}
	pipe := s.rdb.Pipeline()
	for i := range n {
		pipe.XAdd(ctx, &redis.XAddArgs{
			Stream: s.prefix + strconv.Itoa(i%partitions),
			Values: []string{"n", strconv.Itoa(i)},
		})
	}
	_, err := pipe.Exec(ctx)
	return err
}
