package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// ServerCPU returns the CPU time the Redis server has used since it started
// (INFO cpu: used_cpu_sys + used_cpu_user; on a cluster, the sum over its
// masters). It is the whole server's, whoever made it busy: read before
// and after a rebalance, it says what the rebalance cost the server, on a
// server nothing else uses.
func (s *Store) ServerCPU(ctx context.Context) (time.Duration, error) {
	if err := checkContext(ctx, "server CPU"); err != nil {
		return 0, err
	}
	if cc, ok := s.client.(*redis.ClusterClient); ok {
		var mu sync.Mutex
		var sum time.Duration
		err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			d, err := infoCPU(ctx, c)
			mu.Lock()
			sum += d
			mu.Unlock()
			return err
		})
		return sum, err
	}
	return infoCPU(ctx, s.client)
}

func infoCPU(ctx context.Context, c redis.Cmdable) (time.Duration, error) {
	info, err := c.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, fail("INFO cpu", err)
	}
	return parseInfoCPU(info)
}

// parseInfoCPU adds used_cpu_sys and used_cpu_user of an INFO cpu reply.
func parseInfoCPU(info string) (time.Duration, error) {
	var sum float64
	found := 0
	for line := range strings.SplitSeq(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || (k != "used_cpu_sys" && k != "used_cpu_user") {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, fmt.Errorf("redisstore: INFO cpu: %s is %q, not a number", k, v)
		}
		sum += f
		found++
	}
	if found != 2 {
		return 0, fmt.Errorf("redisstore: INFO cpu: used_cpu_sys or used_cpu_user missing")
	}
	return time.Duration(sum * float64(time.Second)), nil
}
