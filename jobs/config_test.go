package jobs_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/herdhq/herd/jobs"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/memstore"
)

func TestStartRejectsBadConfig(t *testing.T) {
	st := memstore.New()
	defer st.Close()
	run := func(context.Context, jobs.Run) error { return nil }
	good := jobs.Config{Store: st, Group: "g", Every: time.Hour, Run: run}
	var nilStore *memstore.Store
	for _, tc := range []struct {
		name string
		edit func(*jobs.Config)
		want string
	}{
		{"no store", func(c *jobs.Config) { c.Store = nil }, "Store is required"},
		{"nil store", func(c *jobs.Config) { c.Store = nilStore }, "Store is a nil *memstore.Store"},
		{"no run", func(c *jobs.Config) { c.Run = nil }, "Run is required"},
		{"no schedule", func(c *jobs.Config) { c.Every = 0 }, "no schedule"},
		{"two schedules", func(c *jobs.Config) { c.Cron = "0 * * * *" }, "both Every and Cron"},
		{"bad cron", func(c *jobs.Config) { c.Every, c.Cron = 0, "0 6 * *" }, "Cron: jobs: cron expression"},
		{"tiny every", func(c *jobs.Config) { c.Every = time.Microsecond }, "out of range"},
		{"empty keys", func(c *jobs.Config) { c.Keys = []string{} }, "Keys is empty"},
		{"duplicate keys", func(c *jobs.Config) { c.Keys = []string{"a", "a"} }, "twice"},
		{"bad group", func(c *jobs.Config) { c.Group = "a\nb" }, "control character"},
		{"negative", func(c *jobs.Config) { c.MaxConcurrent = -1 }, "MaxConcurrent -1 is negative"},
		{"retry", func(c *jobs.Config) { c.RetryDelay, c.RetryMax = time.Hour, time.Minute }, "RetryMax 1m0s is below RetryDelay 1h0m0s"},
	} {
		cfg := good
		tc.edit(&cfg)
		s, err := jobs.Start(t.Context(), cfg)
		if err == nil {
			_ = s.Leave(t.Context())
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: Start() = %v; want ErrInvalid mentioning %q", tc.name, err, tc.want)
		}
	}
	var nilCtx context.Context
	if _, err := jobs.Start(nilCtx, good); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("nil context: %v", err)
	}
}
