package netpart

import (
	"context"
	"fmt"
	"math/rand"
	"os/exec"
	"slices"
	"strings"
	"time"
)

// Kind is a kind of network fault.
type Kind string

const (
	// LinkDown cuts one member off: its root-side veth is set down.
	LinkDown Kind = "link-down"
	// Blackhole cuts one member off: its namespace drops every packet
	// both ways (nftables), the link stays up.
	Blackhole Kind = "blackhole"
	// Delay delays one member's packets both ways: a tbf rate limit on
	// both ends of its veth queues them (this kernel has no netem).
	Delay Kind = "delay"
	// Drop drops a share of one member's packets both ways, at random
	// (nftables numgen in its namespace).
	Drop Kind = "drop"
	// StoreCut cuts the store off from every member: every root-side veth
	// is set down.
	StoreCut Kind = "store-cut"
	// LongCut is a Blackhole held for LongCutHold: longer than a
	// PostgreSQL server takes to drop the member's tied connection by its
	// TCP keepalive and user timeout, so the server frees the member's
	// advisory lock during the cut. Drawn only when asked for
	// (Config.Kinds).
	LongCut Kind = "long-cut"
)

// DefaultKinds are the kinds a schedule draws from unless told otherwise.
var DefaultKinds = []Kind{LinkDown, Blackhole, Delay, Drop, StoreCut}

// LongCutHold is how long a LongCut lasts: 5 TTL + 4 s (14 s at TTL 2 s).
// The tied connection's server side gives up on a cut member within
// 4 TTL + 2 s of the cut (pgstore's tieSettings: tcp_user_timeout 4 TTL
// from the watch statement's answer, which the server sends within 2 s;
// or keepalives after TTL idle, 3 probes TTL apart), so the server drops
// it a TTL + 2 s before the heal or more.
func LongCutHold(ttl time.Duration) time.Duration { return 5*ttl + 4*time.Second }

// Fault is one fault of a run's schedule: Kind on Member (-1: everyone)
// from Start to End (set when applied and healed), with its netem
// parameters.
type Fault struct {
	Kind     Kind
	Member   int
	Hold     time.Duration // how long it lasts
	RateKbit int           // Delay: the rate limit, kbit/s
	LossPct  int           // Drop: the share of packets dropped, percent
	Start    time.Time     // when it was in place
	End      time.Time     // when it was healed
}

// Cuts says whether the fault cuts Member off from the store entirely.
func (f Fault) Cuts() bool { return f.Kind == LinkDown || f.Kind == Blackhole || f.Kind == LongCut }

func (f Fault) String() string {
	s := fmt.Sprintf("%s member=%d hold=%v", f.Kind, f.Member, f.Hold.Round(time.Millisecond))
	switch f.Kind {
	case Delay:
		s += fmt.Sprintf(" rate=%dkbit", f.RateKbit)
	case Drop:
		s += fmt.Sprintf(" loss=%d%%", f.LossPct)
	}
	return s
}

// Schedule draws n faults of kinds (nil: DefaultKinds) for members
// members from rng. A cut lasts longer than TTL + 1 s, so the checker sees
// its partitions run elsewhere; a store cut is sometimes shorter than the
// fence time (nobody notices) and sometimes longer than the TTL (everyone
// fences itself).
func Schedule(rng *rand.Rand, n, members int, ttl time.Duration, kinds []Kind) []Fault {
	if len(kinds) == 0 {
		kinds = DefaultKinds
	}
	var fs []Fault
	for i := 0; i < n; i++ {
		f := Fault{Kind: kinds[rng.Intn(len(kinds))], Member: rng.Intn(members)}
		switch f.Kind {
		case LinkDown, Blackhole:
			f.Hold = ttl + time.Second + time.Duration(rng.Int63n(int64(2*time.Second)))
		case LongCut:
			f.Hold = LongCutHold(ttl)
		case Delay:
			f.Hold = 2*time.Second + time.Duration(rng.Int63n(int64(3*time.Second)))
			f.RateKbit = 8 << rng.Intn(4) // 8 to 64 kbit/s
		case Drop:
			f.Hold = 2*time.Second + time.Duration(rng.Int63n(int64(3*time.Second)))
			f.LossPct = 10 + rng.Intn(50)
		case StoreCut:
			f.Member = -1
			f.Hold = 500*time.Millisecond + time.Duration(rng.Int63n(int64(ttl+2*time.Second)))
		}
		fs = append(fs, f)
	}
	return fs
}

// Apply puts f in place.
func (n *Net) Apply(ctx context.Context, f Fault) error {
	switch f.Kind {
	case LinkDown:
		return run(ctx, "ip", "link", "set", n.nodes[f.Member].rootLink, "down")
	case Blackhole, LongCut:
		return n.drop(ctx, f.Member, 100)
	case Delay:
		return n.rateLimit(ctx, f.Member, f.RateKbit)
	case Drop:
		return n.drop(ctx, f.Member, f.LossPct)
	case StoreCut:
		for _, nd := range n.nodes {
			if err := run(ctx, "ip", "link", "set", nd.rootLink, "down"); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("netpart: unknown fault %q", f.Kind)
}

// ParseKinds reads a comma-separated list of fault kinds ("long-cut",
// "blackhole,link-down"); "" is nil, DefaultKinds.
func ParseKinds(list string) ([]Kind, error) {
	if list == "" {
		return nil, nil
	}
	var ks []Kind
	for _, k := range strings.Split(list, ",") {
		k := Kind(strings.TrimSpace(k))
		if !slices.Contains(DefaultKinds, k) && k != LongCut {
			return nil, fmt.Errorf("netpart: unknown fault kind %q: want some of %v, %s", k, DefaultKinds, LongCut)
		}
		ks = append(ks, k)
	}
	return ks, nil
}

// Heal undoes f.
func (n *Net) Heal(ctx context.Context, f Fault) error {
	switch f.Kind {
	case LinkDown:
		return run(ctx, "ip", "link", "set", n.nodes[f.Member].rootLink, "up")
	case Blackhole, LongCut, Drop:
		return run(ctx, "ip", "netns", "exec", n.nodes[f.Member].ns, "nft", "delete", "table", "inet", nftTable)
	case Delay:
		nd := n.nodes[f.Member]
		if err := run(ctx, "tc", "qdisc", "del", "dev", nd.rootLink, "root"); err != nil {
			return err
		}
		return run(ctx, "ip", "netns", "exec", nd.ns, "tc", "qdisc", "del", "dev", nd.nsLink, "root")
	case StoreCut:
		for _, nd := range n.nodes {
			if err := run(ctx, "ip", "link", "set", nd.rootLink, "up"); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("netpart: unknown fault %q", f.Kind)
}

// nftTable is the nftables table of a member's namespace that drops its
// packets; it lives and dies with the namespace.
const nftTable = "netpart"

// drop makes member i's namespace drop pct percent of the packets it
// sends and receives, at random (100: all).
func (n *Net) drop(ctx context.Context, i, pct int) error {
	match := fmt.Sprintf("numgen random mod 100 < %d ", pct)
	if pct >= 100 {
		match = ""
	}
	rules := fmt.Sprintf(`table inet %[1]s {
  chain in { type filter hook input priority 0; policy accept; iifname "%[2]s" %[3]sdrop; }
  chain out { type filter hook output priority 0; policy accept; oifname "%[2]s" %[3]sdrop; }
}
`, nftTable, n.nodes[i].nsLink, match)
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", n.nodes[i].ns, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("netpart: nft in %s: %w: %s", n.nodes[i].ns, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// rateLimit puts a tbf qdisc of kbit kbit/s on both ends of member i's
// veth pair: packets queue behind each other (up to 5 s, never dropped
// for lateness before that), so each one is delayed by the bytes ahead
// of it: a store reply of 1 KB takes half a second at 16 kbit/s.
func (n *Net) rateLimit(ctx context.Context, i, kbit int) error {
	nd := n.nodes[i]
	tbf := []string{"root", "tbf", "rate", fmt.Sprintf("%dkbit", kbit), "burst", "1600", "latency", "5s"}
	if err := run(ctx, append([]string{"tc", "qdisc", "add", "dev", nd.rootLink}, tbf...)...); err != nil {
		return err
	}
	return run(ctx, append([]string{"ip", "netns", "exec", nd.ns, "tc", "qdisc", "add", "dev", nd.nsLink}, tbf...)...)
}
