package etcdstore

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/herdhq/herd/internal/stagger"
)

// The client's connections. The etcd client sends every call to an
// endpoint on one gRPC connection. After a network cut, the connection
// that crossed it holds the calls made on it until TCP sends its segments
// again, on a back-off that doubles from 200 ms (0.2, 0.6, 1.4, 3.0, 6.2 s
// after the first loss), and gRPC's keep-alive (pings at least 10 s apart) notices
// later still: a member back from a cut longer than its TTL would open its
// new session seconds after the network is back. So a store made by Open
// dials the client's connections itself, and when a call fails on its
// deadline with nothing arrived on its connection since the call last
// sent, it drops the connection (a reset: what the failed calls left
// unsent is never sent) if the kernel is sending again data the server
// has not acknowledged (the path loses what is sent on it), or if the
// call waited silentMax with no answer (a proxy that acknowledges but
// does not forward, or a system whose TCP state cannot be read). A call
// that failed on its deadline on a connection that is only slow (a
// loaded server: the kernel acknowledges, the answer comes late) leaves
// it alone: dropping it would fail every other call under way on it.
// Before every call, a connection whose data the kernel has held
// unacknowledged through two retransmission timeouts is dropped too, so
// that a call made after a heal does not wait behind it. The client dials
// again at once; the dials start a new attempt every
// dialStagger while none has connected, so that a dial made during a cut
// (its SYN lost, sent again 1 s, then 3 s, later) does not hold the
// connection back after the heal, and gRPC waits at most redialMax
// between dials that fail. A connection whose handshake gets no answer is
// dropped as well (handshake.go).
//
// Sessions are not touched: a lease lives in the cluster, not in a
// connection, and every renewal is a call of its own (KeepAlive). Watches
// the client resumes on the new connection from the revision they had
// reached.

const (
	// dialStagger is how long a dial waits for its connection before it
	// starts another beside it.
	dialStagger = 200 * time.Millisecond
	// maxDials bounds the attempts of one dial that are under way.
	maxDials = 32
	// redialBase and redialMax are gRPC's back-off between dials that
	// failed (doubling from redialBase).
	redialBase = 50 * time.Millisecond
	redialMax  = 500 * time.Millisecond
	// silentMax is how long a call that failed on its deadline waited
	// with nothing arriving on its connection for the connection to be
	// dropped though the kernel saw no loss.
	silentMax = time.Second
)

// epoch is the origin of the connections' read times (monotonic).
var epoch = time.Now()

func sinceEpoch() int64 { return int64(time.Since(epoch)) }

// conns dials the client's connections and keeps the open ones, by local
// address.
type conns struct {
	userTimeout time.Duration                                   // TCP_USER_TIMEOUT of each connection (0: the system's)
	netDial     func(context.Context, string) (net.Conn, error) // one attempt (nil: net.Dialer's)

	mu      sync.Mutex
	open    map[string]*conn
	stopped bool // stop was called: a connection dialled since is closed

	// watchers counts the handshake watchers (watchHandshake), which end
	// when done is closed (stop).
	watchers sync.WaitGroup
	done     chan struct{}
}

// conn is one of the client's connections; read is when a read last
// returned bytes, connected when it connected (sinceEpoch).
type conn struct {
	net.Conn
	read      atomic.Int64
	connected int64
	closed    atomic.Bool
	owner     *conns
	once      sync.Once
}

func (c *conn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.read.Store(sinceEpoch())
	}
	return n, err
}

func (c *conn) Close() error {
	c.once.Do(func() {
		c.closed.Store(true)
		c.owner.mu.Lock()
		delete(c.owner.open, c.LocalAddr().String())
		c.owner.mu.Unlock()
	})
	return c.Conn.Close()
}

// reset closes c with a TCP reset: what the kernel has not sent yet is
// dropped, and the server learns at once that the connection is gone.
func (c *conn) reset() {
	if tc, ok := c.Conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// dialOptions are the client's gRPC options for these connections.
func (cs *conns) dialOptions(connectTimeout time.Duration) []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithContextDialer(cs.dial),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: redialBase, Multiplier: 2, Jitter: 0.2, MaxDelay: redialMax},
			MinConnectTimeout: connectTimeout,
		}),
		grpc.WithChainUnaryInterceptor(cs.unary),
		grpc.WithChainStreamInterceptor(cs.stream),
	}
}

// dial connects to addr (host:port), starting a new attempt every
// dialStagger while none has connected, until one connects, every attempt
// has failed, or ctx ends (gRPC's connect deadline).
func (cs *conns) dial(ctx context.Context, addr string) (net.Conn, error) {
	begun := time.Now()
	c, started, err := stagger.Dial(ctx, dialStagger, maxDials, func(ctx context.Context) (net.Conn, error) {
		return cs.attempt(ctx, addr)
	})
	if err != nil {
		logConn("dial failed", nil, "took", time.Since(begun), "attempts", started, "err", err)
		return nil, err // gRPC dials again after its back-off
	}
	logConn("connected", c, "took", time.Since(begun), "attempts", started)
	tc, ok := cs.track(c)
	if !ok {
		_ = c.Close()
		return nil, errors.New("etcdstore: the store is closed; open another")
	}
	return tc, nil
}

// stop ends the handshake watchers and waits for them; a connection
// dialled from then on is closed at once. Called once the client is
// closed (Store.Close), or the open of a store failed.
func (cs *conns) stop() {
	cs.mu.Lock()
	if !cs.stopped {
		cs.stopped = true
		close(cs.doneChan())
	}
	cs.mu.Unlock()
	cs.watchers.Wait()
}

// doneChan returns done, made on first use. cs.mu is held.
func (cs *conns) doneChan() chan struct{} {
	if cs.done == nil {
		cs.done = make(chan struct{})
	}
	return cs.done
}

// attempt is one connection attempt.
func (cs *conns) attempt(ctx context.Context, addr string) (net.Conn, error) {
	if cs.netDial != nil {
		return cs.netDial(ctx, addr)
	}
	d := net.Dialer{}
	if cs.userTimeout > 0 {
		d.Control = userTimeout(cs.userTimeout)
	}
	return d.DialContext(ctx, "tcp", addr)
}

// track keeps nc among the open connections and starts the watcher of
// its handshake, unless stop was called (ok false).
func (cs *conns) track(nc net.Conn) (c *conn, ok bool) {
	c = &conn{Conn: nc, owner: cs, connected: sinceEpoch()}
	c.read.Store(c.connected)
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.stopped {
		return nil, false
	}
	if cs.open == nil {
		cs.open = map[string]*conn{}
	}
	cs.open[nc.LocalAddr().String()] = c
	done := cs.doneChan()
	cs.watchers.Go(func() { cs.watchHandshake(c, done) }) // counted under cs.mu: stop waits for it
	return c, true
}

// failed handles a call that ended with err on the connection of p, whose
// last message was sent at sent (sinceEpoch): the connection is dropped
// if the call failed on its deadline, nothing has arrived on it since,
// and the kernel is sending again what the server has not acknowledged or
// the call waited silentMax.
func (cs *conns) failed(method string, err error, p *peer.Peer, sent int64) {
	if err == nil {
		return
	}
	if status.Code(err) != codes.DeadlineExceeded && !errors.Is(err, context.DeadlineExceeded) {
		return
	}
	if p == nil || p.LocalAddr == nil {
		logConn("call failed on its deadline before it had a connection", nil, "method", method,
			"waited", time.Duration(sinceEpoch()-sent))
		return
	}
	cs.mu.Lock()
	c := cs.open[p.LocalAddr.String()]
	cs.mu.Unlock()
	if c == nil || c.read.Load() >= sent {
		return
	}
	lossy, _ := retransmitting(c.Conn)
	waited := time.Duration(sinceEpoch() - sent)
	drop := lossy || waited >= silentMax
	logConn("call failed on its deadline with no answer", c.Conn, "method", method, "waited", waited,
		"silent", time.Duration(sinceEpoch()-c.read.Load()), "lossy", lossy, "drop", drop)
	if drop {
		c.reset()
	}
}

// dropStalled drops every connection whose kernel has held data
// unacknowledged through two retransmission timeouts, before a call is
// made: after a heal, the call goes on a new connection instead of
// waiting behind the old one's next retransmission.
func (cs *conns) dropStalled() {
	cs.mu.Lock()
	open := make([]*conn, 0, len(cs.open))
	for _, c := range cs.open {
		open = append(open, c)
	}
	cs.mu.Unlock()
	for _, c := range open {
		if stalled(c.Conn) {
			logConn("dropping a stalled connection before a call", c.Conn)
			c.reset()
		}
	}
}

func (cs *conns) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	cs.dropStalled()
	var p peer.Peer
	sent := sinceEpoch()
	err := invoker(ctx, method, req, reply, cc, append(opts, grpc.Peer(&p))...)
	cs.failed(method, err, &p, sent)
	return err
}

func (cs *conns) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	cs.dropStalled()
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		return nil, err
	}
	w := &watchedStream{ClientStream: s, owner: cs, method: method}
	w.sent.Store(sinceEpoch())
	return w, nil
}

// watchedStream is a stream whose failures on its deadline are checked as
// a unary call's are, from its last message sent.
type watchedStream struct {
	grpc.ClientStream
	owner  *conns
	method string
	sent   atomic.Int64
}

func (w *watchedStream) SendMsg(m any) error {
	w.sent.Store(sinceEpoch())
	err := w.ClientStream.SendMsg(m)
	w.check(err)
	return err
}

func (w *watchedStream) RecvMsg(m any) error {
	err := w.ClientStream.RecvMsg(m)
	w.check(err)
	return err
}

func (w *watchedStream) check(err error) {
	if err == nil {
		return
	}
	if p, ok := peer.FromContext(w.ClientStream.Context()); ok {
		w.owner.failed(w.method, err, p, w.sent.Load())
	}
}
