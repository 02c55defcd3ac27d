package etcdstore

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/herdhq/herd/store"
)

// ServerCPU returns the CPU time the cluster's members have used since they
// started: the sum over the client's endpoints of process_cpu_seconds_total
// on each one's /metrics. It is the whole server's, whoever made it busy:
// read before and after a rebalance, it says what the rebalance cost the
// cluster, on a cluster nothing else uses.
func (s *Store) ServerCPU(ctx context.Context) (time.Duration, error) {
	if err := checkContext(ctx, "server CPU"); err != nil {
		return 0, err
	}
	tr := http.Transport{TLSClientConfig: s.tls}
	hc := &http.Client{Transport: &tr, Timeout: 5 * time.Second}
	defer tr.CloseIdleConnections()
	var sum time.Duration
	for _, ep := range s.c.Endpoints() {
		d, err := metricsCPU(ctx, hc, ep)
		if err != nil {
			return 0, fmt.Errorf("etcdstore: server CPU of %s: %w (%v)", ep, store.ErrUnavailable, err)
		}
		sum += d
	}
	return sum, nil
}

func metricsCPU(ctx context.Context, hc *http.Client, endpoint string) (time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(endpoint, "/")+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("/metrics: %s", resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "process_cpu_seconds_total "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return 0, fmt.Errorf("process_cpu_seconds_total %q: %v", v, err)
			}
			return time.Duration(f * float64(time.Second)), nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("/metrics has no process_cpu_seconds_total")
}
