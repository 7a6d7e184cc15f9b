// Package conns bounds what one client can hold of the API listener: how
// many connections one client address may have open (a net.Listener that
// also reads the PROXY protocol of the trusted proxies in front), how
// many streams an HTTP/2 connection may reset before its answer (an
// http.Handler middleware, HTTP/2 rapid reset).
//
// It is not where time bounds live: the header, idle and HTTP/2 idle
// timeouts are the http.Server's (edge/app), the body's are reqbody's. Nor
// does it slow clients that ignore Retry-After: a connection may carry
// many clients (a proxy in front), so that is decided per subject and
// limit (edge/early).
package conns

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pires/go-proxyproto"
)

// Options are the bounds. Zero fields mean no bound.
type Options struct {
	// PerAddress bounds the open connections of one client address; an
	// IPv6 client counts by its /64, which one host commonly holds whole.
	PerAddress int
	// Exempt are peers whose connections are not bounded by their own
	// address: proxies in front, whose one address carries many clients.
	Exempt []netip.Prefix
	// ProxyProtocol are the peers whose PROXY protocol header (v1 or v2)
	// is believed: their connections are their clients', and are bounded
	// by the address the header names (unless it names an exempt peer, or
	// the connection is the proxy's own, such as a health check). A
	// connection of any other peer is served as it comes.
	ProxyProtocol []netip.Prefix
	// ReadHeaderTimeout bounds the wait for a PROXY protocol header.
	ReadHeaderTimeout time.Duration
	// OnRefused is called for each connection closed for PerAddress.
	OnRefused func()
}

// Listener is a net.Listener that reads the PROXY protocol of the trusted
// proxies (Options.ProxyProtocol) and closes a new connection at once when
// its client address already holds Options.PerAddress open ones.
type Listener struct {
	net.Listener
	opts Options

	mu   sync.Mutex
	open map[netip.Prefix]int
}

// Listen bounds ln's connections by o.
func Listen(ln net.Listener, o Options) *Listener {
	l := &Listener{opts: o, open: map[netip.Prefix]int{}}
	if len(o.ProxyProtocol) > 0 {
		ln = &proxyproto.Listener{Listener: ln, ReadHeaderTimeout: o.ReadHeaderTimeout,
			ConnPolicy: func(c proxyproto.ConnPolicyOptions) (proxyproto.Policy, error) {
				if a, ok := addrOf(c.Upstream); ok && contains(o.ProxyProtocol, a) {
					return proxyproto.USE, nil
				}
				return proxyproto.SKIP, nil // the raw connection, unwrapped
			}}
	}
	l.Listener = ln
	return l
}

// Accept returns the next connection within the bound; the ones past it are
// closed without a word (nothing was read from them yet). A connection of
// a proxy that sends the PROXY protocol is bounded when its header is read,
// on its first read (in the connection's own goroutine, so that a slow
// header never holds the accept loop), and closed there if over the bound.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.opts.PerAddress <= 0 {
			return c, nil
		}
		if pc, ok := c.(*proxyproto.Conn); ok {
			return &proxiedConn{Conn: pc, l: l}, nil
		}
		key, bounded := l.key(c.RemoteAddr())
		if !bounded {
			return c, nil
		}
		if !l.take(key) {
			_ = c.Close()
			continue
		}
		return &conn{Conn: c, l: l, key: key}, nil
	}
}

// take counts a connection of key, or returns false (and counts it as
// refused) when key holds PerAddress already.
func (l *Listener) take(key netip.Prefix) bool {
	l.mu.Lock()
	if l.open[key] >= l.opts.PerAddress {
		l.mu.Unlock()
		if l.opts.OnRefused != nil {
			l.opts.OnRefused()
		}
		return false
	}
	l.open[key]++
	l.mu.Unlock()
	return true
}

// Open returns how many connections the client address a holds open, as
// the bound counts them.
func (l *Listener) Open(a netip.Addr) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open[prefixOf(a)]
}

func addrOf(addr net.Addr) (netip.Addr, bool) {
	if addr == nil {
		return netip.Addr{}, false
	}
	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil {
		return netip.Addr{}, false
	}
	return ap.Addr().Unmap(), true
}

func contains(ps []netip.Prefix, a netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// key is what a connection from addr is counted under, if it is bounded.
func (l *Listener) key(addr net.Addr) (netip.Prefix, bool) {
	a, ok := addrOf(addr)
	if !ok || contains(l.opts.Exempt, a) || contains(l.opts.ProxyProtocol, a) {
		return netip.Prefix{}, false
	}
	return prefixOf(a), true
}

func prefixOf(a netip.Addr) netip.Prefix {
	a = a.Unmap()
	bits := 32
	if a.Is6() {
		bits = 64
	}
	p, _ := a.Prefix(bits)
	return p
}

func (l *Listener) release(key netip.Prefix) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[key]--; l.open[key] <= 0 {
		delete(l.open, key)
	}
}

// conn gives its place back when closed, once.
type conn struct {
	net.Conn
	l      *Listener
	key    netip.Prefix
	closed atomic.Bool
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	if c.closed.CompareAndSwap(false, true) {
		c.l.release(c.key)
	}
	return err
}

// errOverBound is what the first read of a proxied connection over the
// bound returns: the server closes the connection on it, unanswered.
var errOverBound = errors.New("conns: the client address holds as many connections as it may")

// proxiedConn is a connection of a proxy that sends the PROXY protocol:
// its client, and so its place in the bound, is known on the first read.
type proxiedConn struct {
	net.Conn
	l    *Listener
	once sync.Once

	mu      sync.Mutex // orders admit with a Close from another goroutine
	refused bool
	counted bool
	closed  bool
	key     netip.Prefix
}

func (c *proxiedConn) Read(p []byte) (int, error) {
	c.once.Do(c.admit)
	if c.refused {
		return 0, errOverBound
	}
	return c.Conn.Read(p)
}

// admit reads the header (RemoteAddr does) and counts the connection
// under its client, unless the client is exempt or the proxy itself.
func (c *proxiedConn) admit() {
	key, bounded := c.l.key(c.Conn.RemoteAddr())
	if !bounded {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	if !c.l.take(key) {
		c.refused = true
		_ = c.Conn.Close()
		return
	}
	c.key, c.counted = key, true
}

func (c *proxiedConn) Close() error {
	err := c.Conn.Close()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed && c.counted {
		c.l.release(c.key)
	}
	c.closed = true
	return err
}

// Resets closes HTTP/2 connections whose client resets far more streams
// than it lets finish: each reset stream costs the edge a call (a token
// check, a Redis round trip, a log line) and the client nothing. A
// connection whose client has reset Max streams before their answer, and
// more than half of all its streams, gets a GOAWAY: its open streams
// finish, it takes no new ones. Go's HTTP/2 server alone only closes a
// connection whose reset streams pile up before their handlers even start.
type Resets struct {
	// Max is the least count of reset streams that closes a connection;
	// 0: no bound.
	Max int
	// OnClose is called once for each connection closed for its resets.
	OnClose func()
}

type streamsKey struct{}

// streams counts one connection's streams by how they ended.
type streams struct {
	reset, finished atomic.Int64
	closing         atomic.Bool
}

// ConnContext is the http.Server's ConnContext: it gives each connection
// its counts ([Resets]).
func ConnContext(ctx context.Context, _ net.Conn) context.Context {
	return context.WithValue(ctx, streamsKey{}, new(streams))
}

// Wrap counts the streams of each HTTP/2 connection that next serves, and
// answers every stream of a connection over the bound with Connection:
// close, which makes Go's HTTP/2 server send GOAWAY.
func (b Resets) Wrap(next http.Handler) http.Handler {
	if b.Max <= 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, _ := r.Context().Value(streamsKey{}).(*streams)
		if s == nil || r.ProtoMajor != 2 {
			// HTTP/1.1: a client that gives up on a call closes its
			// connection with it.
			next.ServeHTTP(w, r)
			return
		}
		if reset := s.reset.Load(); reset >= int64(b.Max) && reset > s.finished.Load() {
			w.Header().Set("Connection", "close")
			if s.closing.CompareAndSwap(false, true) && b.OnClose != nil {
				b.OnClose()
			}
		}
		next.ServeHTTP(w, r)
		// The stream's context ends when the client resets it (or the
		// connection goes); a stream answered in full ends it only after
		// the handler returns.
		if r.Context().Err() != nil {
			s.reset.Add(1)
		} else {
			s.finished.Add(1)
		}
	})
}
