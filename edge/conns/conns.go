// Package conns bounds what one client can hold of the API listener: how
// many connections one peer address may have open (a net.Listener), how
// many streams an HTTP/2 connection may reset before its answer (an
// http.Handler middleware, HTTP/2 rapid reset), and how fast a connection
// whose client ignores Retry-After is served (a middleware that holds its
// early calls).
//
// It is not where time bounds live: the header, idle and HTTP/2 idle
// timeouts are the http.Server's (edge/app), the body's are reqbody's.
package conns

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
)

// Options are the bounds. Zero fields mean no bound.
type Options struct {
	// PerAddress bounds the open connections of one peer address; an IPv6
	// peer counts by its /64, which one host commonly holds whole.
	PerAddress int
	// Exempt are peers whose connections are not bounded: proxies in
	// front, whose one address carries many clients.
	Exempt []netip.Prefix
	// OnRefused is called for each connection closed for PerAddress.
	OnRefused func()
}

// Listener is a net.Listener that closes a new connection at once when
// its peer address already holds Options.PerAddress open ones.
type Listener struct {
	net.Listener
	opts Options

	mu   sync.Mutex
	open map[netip.Prefix]int
}

// Listen bounds ln's connections by o.
func Listen(ln net.Listener, o Options) *Listener {
	return &Listener{Listener: ln, opts: o, open: map[netip.Prefix]int{}}
}

// Accept returns the next connection within the bound; the ones past it are
// closed without a word (nothing was read from them yet).
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		key, bounded := l.key(c.RemoteAddr())
		if !bounded {
			return c, nil
		}
		l.mu.Lock()
		if l.open[key] >= l.opts.PerAddress {
			l.mu.Unlock()
			_ = c.Close()
			if l.opts.OnRefused != nil {
				l.opts.OnRefused()
			}
			continue
		}
		l.open[key]++
		l.mu.Unlock()
		return &conn{Conn: c, l: l, key: key}, nil
	}
}

// Open returns how many connections the peer address a holds open, as the
// bound counts them.
func (l *Listener) Open(a netip.Addr) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open[prefixOf(a)]
}

func (l *Listener) key(addr net.Addr) (netip.Prefix, bool) {
	if l.opts.PerAddress <= 0 {
		return netip.Prefix{}, false
	}
	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil {
		return netip.Prefix{}, false
	}
	a := ap.Addr().Unmap()
	for _, p := range l.opts.Exempt {
		if p.Contains(a) {
			return netip.Prefix{}, false
		}
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
// its counts ([Resets]) and what it was last told ([RetryAfter]).
func ConnContext(ctx context.Context, _ net.Conn) context.Context {
	return context.WithValue(context.WithValue(ctx, streamsKey{}, new(streams)), waitKey{}, new(wait))
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
