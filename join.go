package herd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/herdhq/herd/store"
)

// DefaultJoinTimeout is how long Join retries a store that does not answer
// (Config.JoinTimeout).
const DefaultJoinTimeout = time.Minute

// Bounds of the pause between two attempts of a join step.
const (
	joinRetryFirst = 100 * time.Millisecond
	joinRetryMax   = 5 * time.Second
)

// RetryUnavailable runs op until it succeeds or fails with an error that
// does not wrap store.ErrUnavailable (a store down, restarting or slow),
// pausing with exponential back-off and full jitter (100 ms doubling up to
// 5 s) and logging each retry at WARN. When ctx ends it returns the last
// error, naming the attempts made. Join uses it for each of its store calls,
// herd run and herd jobs for opening the store: one rule for whoever joins.
func RetryUnavailable(ctx context.Context, log *slog.Logger, step string, op func(ctx context.Context) error) error {
	if ctx == nil {
		return errNilContext(step)
	}
	if op == nil {
		return fmt.Errorf("herd: %s: no operation to retry (op is nil): %w", step, store.ErrInvalid)
	}
	if log == nil {
		log = slog.Default()
	}
	pause := joinRetryFirst
	for attempt := 1; ; attempt++ {
		err := op(ctx)
		if err == nil || !errors.Is(err, store.ErrUnavailable) {
			return err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("gave up after %d attempts: %w", attempt, err)
		}
		wait := rand.N(pause) + 1
		log.Warn("store unavailable; retrying", "step", step, "attempt", attempt, "retry_in", wait.Round(time.Millisecond), "err", err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("gave up after %d attempts: %w", attempt, err)
		case <-t.C:
		}
		pause = min(2*pause, joinRetryMax)
	}
}

// joinPartitionSet is Join's first store call: it checks the group's kind
// (setting it if none) and stores cfg.Partitions as KeepStoredPartitions
// says, with the warnings an operator needs.
func joinPartitionSet(ctx context.Context, st store.Store, cfg Config) error {
	set := store.PartitionSet{Kind: cfg.Kind, Partitions: cfg.Partitions}
	switch {
	case cfg.Partitions == nil:
		set.Mode = store.SetKindOnly
	case cfg.KeepStoredPartitions:
		set.Mode = store.SetIfAbsent
	}
	var res store.SetResult
	err := RetryUnavailable(ctx, cfg.Logger, "set partitions", func(ctx context.Context) error {
		var err error
		res, err = st.SetPartitions(ctx, cfg.Group, set)
		return err
	})
	if err != nil {
		return err
	}
	log := cfg.Logger.With("group", cfg.Group, "member", cfg.Member)
	noun := "partition set"
	toSet := "set one with herd partitions set, or join with a partition set (herd run --partitions, Config.Partitions)"
	toReplace := "herd partitions set, or join with herd run --replace-partitions"
	if cfg.Kind == store.KindKeys {
		noun = "key set"
		toSet = "set them with herd jobs --keys, or jobs.Config.Keys"
		toReplace = "join with herd jobs --replace-keys"
	}
	switch {
	case !res.Stored:
		log.Warn("the group has no "+noun+": this member runs nothing until one is stored; "+toSet, "kind", cfg.Kind)
	case set.Mode == store.SetIfAbsent && !res.Same:
		log.Warn("the "+noun+" given differs from the one the group holds (or was stored by an older herd): "+
			"joining on the stored one, which wins; to replace it, use "+toReplace, "given", len(cfg.Partitions))
	case res.Replaced:
		log.Warn("replaced the group's "+noun+", which was different, by the one given", "given", len(cfg.Partitions))
	}
	return nil
}
