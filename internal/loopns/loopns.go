//go:build linux

// Package loopns is a network namespace of a test's own (it needs root)
// whose loopback carries a client's connections to a forwarder, which
// passes them on to a server outside the namespace. Setting the loopback
// down loses every packet on those connections, as a network cut does:
// the kernel's TCP keeps what it has not delivered and sends it again on
// its back-off, which a user-space proxy cannot show.
package loopns

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/herdhq/herd/internal/valve"
	"golang.org/x/sys/unix"
)

// NS is a network namespace whose loopback is up when New returns.
type NS struct{ fd int }

// New makes a namespace, closed when t ends; it skips t without root.
func New(t testing.TB) *NS {
	t.Helper()
	type made struct {
		fd  int
		err error
	}
	ch := make(chan made)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			ch <- made{-1, err}
			return
		}
		fd, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		ch <- made{fd, err}
	}()
	m := <-ch
	if errors.Is(m.err, unix.EPERM) {
		t.Skip("a network namespace needs root (CAP_SYS_ADMIN); skipping")
	}
	if m.err != nil {
		t.Fatalf("loopns: a network namespace: %v", m.err)
	}
	t.Cleanup(func() { _ = unix.Close(m.fd) })
	n := &NS{fd: m.fd}
	n.Loopback(t, true)
	return n
}

// Do runs f on a thread in n (thrown away after).
func (n *NS) Do(f func() error) error {
	ch := make(chan error)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := unix.Setns(n.fd, unix.CLONE_NEWNET); err != nil {
			ch <- err
			return
		}
		ch <- f()
	}()
	return <-ch
}

// Loopback sets n's loopback up or down.
func (n *NS) Loopback(t testing.TB, up bool) {
	t.Helper()
	err := n.Do(func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		ifr, err := unix.NewIfreq("lo")
		if err != nil {
			return err
		}
		if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
			return err
		}
		flags := ifr.Uint16()
		if up {
			flags |= unix.IFF_UP
		} else {
			flags &^= unix.IFF_UP
		}
		ifr.SetUint16(flags)
		return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
	})
	if err != nil {
		t.Fatalf("loopns: setting the loopback up=%v: %v", up, err)
	}
}

// Sysctl writes value to the setting name of n's own (a path under
// /proc/sys/net, such as "ipv4/tcp_syn_linear_timeouts"); it reports
// false if the kernel has no such setting.
func (n *NS) Sysctl(t testing.TB, name, value string) bool {
	t.Helper()
	err := n.Do(func() error {
		return os.WriteFile("/proc/sys/net/"+name, []byte(value), 0)
	})
	if errors.Is(err, os.ErrNotExist) {
		return false
	}
	if err != nil {
		t.Fatalf("loopns: setting %s to %s: %v", name, value, err)
	}
	return true
}

// Dial connects to addr from n; it has the signature of a dialer's
// DialContext.
func (n *NS) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := n.Do(func() error {
		var err error
		var d net.Dialer
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// Forward listens on n's loopback and forwards every connection to target
// (outside n); it returns the address to dial from n. The listener and
// the connections are closed when t ends.
func (n *NS) Forward(t testing.TB, target string) string {
	t.Helper()
	addr, _ := n.ForwardCounting(t, target)
	return addr
}

// ForwardCounting is Forward, and also returns the count of the
// connections accepted so far.
func (n *NS) ForwardCounting(t testing.TB, target string) (addr string, accepted func() int) {
	t.Helper()
	var ln net.Listener
	if err := n.Do(func() error {
		var err error
		ln, err = net.Listen("tcp", "127.0.0.1:0")
		return err
	}); err != nil {
		t.Fatalf("loopns: listen: %v", err)
	}
	return ln.Addr().String(), valve.Forward(t, ln, target, nil)
}

// Socket is one IPv4 TCP socket of the namespace, as /proc/net/tcp shows it.
type Socket struct {
	Local, Remote int    // ports
	State         string // "ESTABLISHED", "FIN_WAIT1", ...
	Unsent        int    // bytes sent and not acknowledged, or not sent yet (tx_queue)
	Retransmits   int    // timeouts since the last acknowledgement (a SYN_SENT socket: its SYN sent again)
}

var tcpStates = map[string]string{
	"01": "ESTABLISHED", "02": "SYN_SENT", "03": "SYN_RECV", "04": "FIN_WAIT1",
	"05": "FIN_WAIT2", "06": "TIME_WAIT", "07": "CLOSE", "08": "CLOSE_WAIT",
	"09": "LAST_ACK", "0A": "LISTEN", "0B": "CLOSING",
}

// Sockets lists n's IPv4 TCP sockets, those closed by their process and
// still sending (orphans) included.
func (n *NS) Sockets(t testing.TB) []Socket {
	t.Helper()
	var out []Socket
	err := n.Do(func() error {
		f, err := os.Open("/proc/thread-self/net/tcp")
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Scan() // the header
		for sc.Scan() {
			s, err := parseSocket(sc.Text())
			if err != nil {
				return err
			}
			out = append(out, s)
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatalf("loopns: reading the namespace's sockets: %v", err)
	}
	return out
}

// parseSocket reads a line of /proc/net/tcp:
// "sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt ...".
func parseSocket(line string) (Socket, error) {
	f := strings.Fields(line)
	if len(f) < 5 {
		return Socket{}, fmt.Errorf("a line of /proc/net/tcp: %q", line)
	}
	port := func(a string) int {
		_, p, _ := strings.Cut(a, ":")
		n, _ := strconv.ParseInt(p, 16, 32)
		return int(n)
	}
	tx, _, _ := strings.Cut(f[4], ":")
	unsent, err := strconv.ParseInt(tx, 16, 64)
	if err != nil {
		return Socket{}, fmt.Errorf("a line of /proc/net/tcp: %q", line)
	}
	var retrans int64
	if len(f) > 6 {
		retrans, _ = strconv.ParseInt(f[6], 16, 32)
	}
	state, ok := tcpStates[f[3]]
	if !ok {
		state = f[3]
	}
	return Socket{Local: port(f[1]), Remote: port(f[2]), State: state, Unsent: int(unsent), Retransmits: int(retrans)}, nil
}
