package herd

import (
	"bytes"
	"log/slog"
	"strconv"
	"strings"
	"testing"
)

// A rebalance step of 100,000 partitions, with ids long and short, logs
// short lines at every level: counts at INFO, the first ids at DEBUG.
func TestLogStepLinesShort(t *testing.T) {
	for _, h := range []string{"text", "json"} {
		var buf bytes.Buffer
		opts := &slog.HandlerOptions{Level: slog.LevelDebug}
		var handler slog.Handler = slog.NewTextHandler(&buf, opts)
		if h == "json" {
			handler = slog.NewJSONHandler(&buf, opts)
		}
		log := slog.New(handler).With("group", "orders", "member", "worker-7.example.com-12345")
		var s stepLog
		long := strings.Repeat("tenant-ü-", 60) // 600 bytes, a multi-byte rune at the cut
		for i := range 100_000 {
			s.claim(strconv.Itoa(i), uint64(1_790_000_000_000_000+i))
			s.handingOff("city:" + strconv.Itoa(i))
			s.dropLost(long + strconv.Itoa(i))
		}
		s.write(log, 100_000)
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		if len(lines) != 4 {
			t.Fatalf("%s: %d lines, want 4:\n%s", h, len(lines), buf.String())
		}
		for _, l := range lines {
			if len(l) > 300 {
				t.Errorf("%s: a line of %d bytes: %s", h, len(l), l)
			}
			if !strings.Contains(l, "100000") {
				t.Errorf("%s: line without the count: %s", h, l)
			}
		}
		if !strings.Contains(lines[0], "claimed") || !strings.Contains(lines[0], "1790000000000000-1790000000099999") {
			t.Errorf("%s: summary line %s", h, lines[0])
		}
		t.Logf("%s:\n%s", h, buf.String())
	}
}

func TestLogListIDs(t *testing.T) {
	ids := make([]string, 6000)
	for i := range ids {
		ids[i] = strconv.Itoa(i)
	}
	got := listIDs(ids)
	if len(got) > 200 || !strings.HasPrefix(got, "6000 partitions: 0 1 2") || !strings.HasSuffix(got, "and 5990 more") {
		t.Fatalf("listIDs of 6000 ids: %q", got)
	}
}
