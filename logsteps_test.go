package herd_test

import (
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/store/memstore"
)

// At INFO a member writes one line per rebalance step, with counts and no
// ids: a join, a second member's join and a leave of 640 partitions make
// one line each per member concerned, all short.
func TestLogOneLinePerStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		var logs capture
		join := func(id string, ps []herd.Partition) *herd.Member {
			m, err := herd.Join(t.Context(), st, herd.Config{
				Group: "g", Member: id, Partitions: ps, Logger: logs.logger(slog.LevelInfo),
				Handler: func(c *herd.Claim) error { <-c.Context().Done(); return nil },
			})
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
		a := join("a", herd.Numbered(640))
		time.Sleep(5 * time.Second)
		b := join("b", nil)
		time.Sleep(5 * time.Second)
		if err := a.Leave(t.Context()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Second)
		if err := b.Leave(t.Context()); err != nil {
			t.Fatal(err)
		}
		out := strings.TrimSpace(logs.String())
		want := []string{
			"member=a claimed=640 handed_off=0 lost=0 owned=640",
			"member=a claimed=0 handed_off=320 lost=0 owned=320",
			"member=b claimed=320 handed_off=0 lost=0 owned=320",
			"member=a partitions=320",
			"member=b claimed=320 handed_off=0 lost=0 owned=640",
		}
		lines := strings.Split(out, "\n")
		for _, l := range lines {
			if len(l) > 300 {
				t.Errorf("a line of %d bytes: %s", len(l), l)
			}
		}
		steps := strings.Count(out, "msg=rebalanced")
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("no line with %q", w)
			}
		}
		if steps != 4 || len(lines) != 8 {
			t.Errorf("%d lines, %d of them steps; want 8 and 4", len(lines), steps)
		}
		t.Logf("logs:\n%s", out)
	})
}
