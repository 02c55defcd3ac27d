package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/herdhq/herd/jobs"
	"github.com/herdhq/herd/store/memstore"
	"github.com/herdhq/herd/store/storetest"
)

// Every exported call of the package that takes a context, given a nil one
// (or a nil store, an empty group), returns an error wrapping ErrInvalid
// and does not panic.
func TestNilContext(t *testing.T) {
	st := memstore.New()
	defer st.Close()
	run := func(context.Context, jobs.Run) error { return nil }
	s, err := jobs.Start(t.Context(), jobs.Config{Store: st, Group: "g", Every: time.Hour, Run: run, Keys: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	var nilCtx context.Context
	var nilStore *memstore.Store
	calls := map[string]func() error{
		"Start(nil ctx)": func() error {
			_, err := jobs.Start(nilCtx, jobs.Config{Store: st, Group: "g", Every: time.Hour, Run: run})
			return err
		},
		"Blackboard(nil ctx)":         func() error { _, err := jobs.Blackboard(nilCtx, st, "g"); return err },
		"Blackboard(nil store)":       func() error { _, err := jobs.Blackboard(t.Context(), nil, "g"); return err },
		"Blackboard(typed nil store)": func() error { _, err := jobs.Blackboard(t.Context(), nilStore, "g"); return err },
		"Blackboard(empty group)":     func() error { _, err := jobs.Blackboard(t.Context(), st, ""); return err },
		"SetKeys(nil ctx)":            func() error { return s.SetKeys(nilCtx, []string{"b"}) },
		"Leave(nil ctx)":              func() error { return s.Leave(nilCtx) },
	}
	storetest.ExpectInvalid(t, "", calls)
	if err := s.Leave(t.Context()); err != nil {
		t.Fatal(err)
	}
}
