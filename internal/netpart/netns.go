package netpart

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// Net is the network of one run: namespace i holds member i and reaches the
// root namespace through a veth pair on the private /30 10.213.X.0/30, X =
// 4*slot+i (root side .1, namespace side .2). Names carry a random tag, so
// two runs never share a namespace, a link or a qdisc.
type Net struct {
	tag   string
	slot  int
	lock  *os.File // flock held on the slot for the run's lifetime
	nodes []node
}

type node struct {
	ns, rootLink, nsLink string
	rootAddr, nsAddr     string
}

// slots is how many runs may hold a subnet block at once (X < 256).
const slots = 60

// maxMembers is the most namespaces one run may have (its block of X).
const maxMembers = 4

// NewNet creates members namespaces with their veth pairs. Close removes
// them; NewNet removes what it made when it fails.
func NewNet(ctx context.Context, members int) (*Net, error) {
	if members < 1 || members > maxMembers {
		return nil, fmt.Errorf("netpart: %d members: 1 to %d", members, maxMembers)
	}
	b := make([]byte, 2)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("netpart: random tag: %w", err)
	}
	n := &Net{tag: hex.EncodeToString(b)}
	if err := n.takeSlot(); err != nil {
		return nil, err
	}
	for i := 0; i < members; i++ {
		x := maxMembers*n.slot + i
		nd := node{
			ns:       fmt.Sprintf("hnp%sm%d", n.tag, i),
			rootLink: fmt.Sprintf("hnp%s%dr", n.tag, i),
			nsLink:   fmt.Sprintf("hnp%s%dn", n.tag, i),
			rootAddr: fmt.Sprintf("10.213.%d.1", x),
			nsAddr:   fmt.Sprintf("10.213.%d.2", x),
		}
		n.nodes = append(n.nodes, nd)
		if err := n.setUp(ctx, nd); err != nil {
			n.Close()
			return nil, err
		}
	}
	return n, nil
}

// takeSlot holds an flock on a file naming a block of subnets no other run
// holds (the kernel frees it when the process dies) and checks that no
// address of this machine is in it already.
func (n *Net) takeSlot() error {
	dir := filepath.Join(os.TempDir(), "herd-netpart-slots")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("netpart: slots: %w", err)
	}
	addrs, err := exec.Command("ip", "-4", "-o", "addr", "show").Output()
	if err != nil {
		return fmt.Errorf("netpart: ip addr show: %w", err)
	}
	for s := 0; s < slots; s++ {
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprint(s)), os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			return fmt.Errorf("netpart: slots: %w", err)
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			f.Close()
			continue
		}
		used := false
		for i := 0; i < maxMembers; i++ {
			used = used || strings.Contains(string(addrs), fmt.Sprintf(" 10.213.%d.", maxMembers*s+i))
		}
		if used {
			f.Close()
			continue
		}
		n.slot, n.lock = s, f
		return nil
	}
	return fmt.Errorf("netpart: all %d subnet slots are taken: too many runs at once", slots)
}

func (n *Net) setUp(ctx context.Context, nd node) error {
	steps := [][]string{
		{"ip", "netns", "add", nd.ns},
		{"ip", "link", "add", nd.rootLink, "type", "veth", "peer", "name", nd.nsLink},
		{"ip", "link", "set", nd.nsLink, "netns", nd.ns},
		{"ip", "addr", "add", nd.rootAddr + "/30", "dev", nd.rootLink},
		{"ip", "link", "set", nd.rootLink, "up"},
		{"ip", "-n", nd.ns, "addr", "add", nd.nsAddr + "/30", "dev", nd.nsLink},
		{"ip", "-n", nd.ns, "link", "set", nd.nsLink, "up"},
		{"ip", "-n", nd.ns, "link", "set", "lo", "up"},
	}
	for _, s := range steps {
		if err := run(ctx, s...); err != nil {
			return err
		}
	}
	return pinNeighbour(ctx, nd)
}

// pinNeighbour makes the namespace's neighbour (ARP) entry for the store's
// side permanent. A link that goes down takes the peer's carrier with it,
// and the kernel drops a learned entry then; after the heal, packets wait
// for the next ARP retry (retrans_time_ms, 1 s by default: 0.5-1 s
// measured here between setting the link up and the first connect), a
// delay of the network's that the check of TTL + 1 s after a heal would
// charge to herd. A permanent entry survives the carrier's loss, so a heal
// is a heal at once. Real networks re-resolve too: add that delay to the
// figures of docs/partitions.md.
func pinNeighbour(ctx context.Context, nd node) error {
	mac, err := os.ReadFile(filepath.Join("/sys/class/net", nd.rootLink, "address"))
	if err != nil {
		return fmt.Errorf("netpart: the address of %s: %w", nd.rootLink, err)
	}
	return run(ctx, "ip", "-n", nd.ns, "neigh", "replace", nd.rootAddr, "lladdr",
		strings.TrimSpace(string(mac)), "dev", nd.nsLink, "nud", "permanent")
}

// run runs one command and returns its output in the error when it fails.
func run(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("netpart: %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// RootAddrs are the root-side addresses, where the store listens.
func (n *Net) RootAddrs() []string {
	var a []string
	for _, nd := range n.nodes {
		a = append(a, nd.rootAddr)
	}
	return a
}

// RootAddr is the root-side address member i reaches the store on.
func (n *Net) RootAddr(i int) string { return n.nodes[i].rootAddr }

// NsAddrs are the members' namespace-side addresses, from which they
// reach the store, by member.
func (n *Net) NsAddrs() []string {
	var a []string
	for _, nd := range n.nodes {
		a = append(a, nd.nsAddr)
	}
	return a
}

// Namespace is the name of member i's namespace.
func (n *Net) Namespace(i int) string { return n.nodes[i].ns }

// Close deletes every veth pair (and the qdiscs on its ends) and every
// namespace (and the nftables rules in it), and frees the slot. It goes on
// past errors and returns the first.
func (n *Net) Close() error {
	var first error
	ctx := context.Background()
	for _, nd := range n.nodes {
		// The root end first: deleting the pair is immediate, while a
		// deleted namespace's links go away asynchronously.
		if _, err := os.Stat("/sys/class/net/" + nd.rootLink); err == nil {
			if err := run(ctx, "ip", "link", "del", nd.rootLink); err != nil && first == nil {
				first = err
			}
		}
		if err := run(ctx, "ip", "netns", "del", nd.ns); err != nil && first == nil && !strings.Contains(err.Error(), "No such file") {
			first = err
		}
	}
	if n.lock != nil {
		n.lock.Close()
	}
	return first
}

// Leftovers lists the namespaces and links of this run still present, for
// a test to assert that Close removed everything.
func (n *Net) Leftovers() []string {
	var left []string
	nss, _ := exec.Command("ip", "netns", "list").Output()
	for _, nd := range n.nodes {
		if strings.Contains(string(nss), nd.ns) {
			left = append(left, "netns "+nd.ns)
		}
		if _, err := os.Stat("/sys/class/net/" + nd.rootLink); err == nil {
			left = append(left, "link "+nd.rootLink)
		}
	}
	return left
}
