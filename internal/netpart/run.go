package netpart

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"time"
)

// Config is one run.
type Config struct {
	Seed       int64
	Backend    string        // "redis" (default), "postgres" or "etcd"
	Members    int           // herd run members, each in a namespace (default 3)
	Partitions int           // partitions 0..Partitions-1 (default 6)
	Faults     int           // faults in a row (default 3)
	TTL        time.Duration // the members' --ttl (default 2 s)
	Kinds      []Kind        // the kinds of faults drawn (nil: DefaultKinds)
	HerdBin    string        // the herd binary
	Dir        string        // where the logs, locks and store files go
	// Logf reports progress (the faults as they are applied); nil: silent.
	Logf func(format string, args ...any)
}

func (c *Config) defaults() {
	if c.Members == 0 {
		c.Members = 3
	}
	if c.Partitions == 0 {
		c.Partitions = 6
	}
	if c.Faults == 0 {
		c.Faults = 3
	}
	if c.TTL == 0 {
		c.TTL = 2 * time.Second
	}
	if c.Backend == "" {
		c.Backend = "redis"
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
}

// Run runs one seed: a network of its own, a store server, the members,
// the seed's faults one after another, each healed and followed by the
// bound plus a quiet window in which the fleet must be settled, then the
// members leave. It removes every namespace, veth and qdisc it made and
// stops every process it started, also when it fails. The history is
// returned for Check; an error means the run itself could not be done.
func Run(ctx context.Context, cfg Config) (_ *History, err error) {
	cfg.defaults()
	if err := os.WriteFile(filepath.Join(cfg.Dir, "child.sh"), []byte(ChildScript), 0o644); err != nil {
		return nil, fmt.Errorf("netpart: child script: %w", err)
	}
	n, err := NewNet(ctx, cfg.Members)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := n.Close(); cerr != nil && err == nil {
			err = cerr
		}
		if left := n.Leftovers(); len(left) > 0 && err == nil {
			err = fmt.Errorf("netpart: left behind: %v", left)
		}
	}()
	store, err := startStore(ctx, cfg.Backend, cfg.Dir, n.RootAddrs())
	if err != nil {
		return nil, err
	}
	defer store.close()

	var members []*member
	defer func() {
		for _, m := range members {
			m.leave(5 * time.Second)
		}
	}()
	for i := 0; i < cfg.Members; i++ {
		m, err := startMember(&cfg, n, i, store.urlOf(n.RootAddr(i)))
		if err != nil {
			return nil, err
		}
		members = append(members, m)
	}
	if err := waitAllRunning(ctx, &cfg, 30*time.Second); err != nil {
		return nil, err
	}
	h := &History{TTL: cfg.TTL}
	for p := 0; p < cfg.Partitions; p++ {
		h.Partitions = append(h.Partitions, fmt.Sprint(p))
	}
	h.Faults, err = playFaults(ctx, &cfg, n)
	h.End = time.Now()
	if err != nil {
		return nil, err
	}
	for _, m := range members {
		m.leave(5 * time.Second)
	}
	members = nil
	for i := 0; i < cfg.Members; i++ {
		evs, err := ReadLog(filepath.Join(cfg.Dir, fmt.Sprintf("m%d.log", i)), i)
		if err != nil {
			return nil, err
		}
		h.Events = append(h.Events, evs...)
	}
	SortEvents(h.Events)
	if cfg.Backend == "postgres" {
		if h.TieEnds, err = tieEnds(cfg.Dir, h.Faults, n.NsAddrs()); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// playFaults applies the seed's faults one after another: settle a second
// and a half, apply, hold, heal, then the bound and a quiet window of two
// seconds before the next. A fault that fails to heal is healed again
// before returning.
func playFaults(ctx context.Context, cfg *Config, n *Net) ([]Fault, error) {
	rng := rand.New(rand.NewSource(cfg.Seed))
	faults := Schedule(rng, cfg.Faults, cfg.Members, cfg.TTL, cfg.Kinds)
	if err := hold(ctx, 1500*time.Millisecond); err != nil {
		return nil, err
	}
	for i := range faults {
		f := &faults[i]
		if err := n.Apply(ctx, *f); err != nil {
			_ = n.Heal(context.Background(), *f)
			return nil, err
		}
		f.Start = time.Now()
		cfg.Logf("%s seed %d: %s at %s", cfg.Backend, cfg.Seed, f, f.Start.Format("15:04:05.000"))
		herr := hold(ctx, f.Hold)
		if err := n.Heal(context.Background(), *f); err != nil {
			return nil, errors.Join(herr, err)
		}
		f.End = time.Now()
		if herr != nil {
			return nil, herr
		}
		if err := hold(ctx, cfg.TTL+time.Second+2*time.Second); err != nil {
			return nil, err
		}
	}
	return faults, nil
}
