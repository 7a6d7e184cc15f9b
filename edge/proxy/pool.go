package proxy

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// PoolOptions configures the upstream pool.
type PoolOptions struct {
	// Upstreams are the backends, http://host:port each. A host name is
	// re-resolved every ResolveInterval and each of its addresses becomes a
	// backend of its own (a Kubernetes headless Service).
	Upstreams []*url.URL
	// DialTimeout bounds connecting to a backend.
	DialTimeout time.Duration
	// ResolveInterval is how often host names are looked up again; 0: never
	// (the name is dialed as is, so the resolver picks one address per
	// connection).
	ResolveInterval time.Duration
	// MaxConnAge retires a backend's connections once they are this old
	// (±10%, so that replicas do not reconnect together): new calls open new
	// connections, which a Service spreads over new pods. 0: never.
	MaxConnAge time.Duration
	// EjectFor is how long a backend that refused a connection (or failed
	// three calls in a row, or failed a health check after a call timed out
	// in it) gets no calls. Default 10s.
	EjectFor time.Duration
	// HealthCheck: active checks of every backend (zero: none).
	HealthCheck HealthCheck
	// Observer counts calls, ejections and health per backend (nil: none).
	Observer Observer
	// HTTP2 tells the calls that need HTTP/2 to the backend (gRPC, for its
	// trailers, and streams); the others go over pooled HTTP/1.1.
	HTTP2 func(*http.Request) bool
	// ReadOnly tells the calls without side effects (the operation table's
	// read_only): only those are sent again after the backend may have
	// received them, when their connection breaks before the answer. nil:
	// none. A call that surely did not reach the backend (its connection
	// was refused, or broke before the call left whole) is sent again
	// whatever it is.
	ReadOnly func(*http.Request) bool
	// Resolver looks host names up (default net.DefaultResolver).
	Resolver interface {
		LookupHost(ctx context.Context, host string) ([]string, error)
	}
	Logger *slog.Logger
	// Pseudonym names this edge in the Via header of each health check
	// (NewPseudonym; "": none), as the proxy does in each call: an edge
	// that checks itself answers that the check came back.
	Pseudonym string
}

// maxMemoryBody bounds the request bodies read before they are sent.
const maxMemoryBody = 64 << 10

// failuresToEject consecutive failed calls (other than a refused
// connection, which ejects at once) eject a backend. Only the backend's
// own failures count: a call its caller's deadline or departure ended
// does not.
const failuresToEject = 3

// Pool is an http.RoundTripper over every backend: it balances calls (the
// less busy of two next to each other in turn), checks every backend's
// health, ejects a backend that fails for a while, and sends a call whose
// connection was refused to another backend. Each backend has an HTTP/1.1
// transport (many pooled connections, uncompressed) and an h2c one (gRPC,
// streams and health checks).
type Pool struct {
	opts      PoolOptions
	endpoints atomic.Pointer[[]*endpoint]
	next      atomic.Uint64
	stop      chan struct{}
	stopOnce  sync.Once
	done      sync.WaitGroup
	// ctx ends health checks in flight when the pool closes.
	ctx    context.Context
	cancel context.CancelFunc
	via    via // in each health check
}

// endpoint is one backend address.
type endpoint struct {
	addr     string // host:port
	inflight atomic.Int64
	calls    atomic.Uint64
	fails    atomic.Int32
	ejected  atomic.Int64 // until, unix nanoseconds
	health   health
	conns    atomic.Pointer[transports]
	obs      BackendObserver
}

// transports are an endpoint's connections of one generation.
type transports struct {
	h1     *h1
	h2     *http.Transport
	retire time.Time // MaxConnAge: after this, a new generation
}

// NewPool returns the pool; it contacts nothing before the first call (host
// names are resolved and backends checked in the background). Close stops
// both.
func NewPool(o PoolOptions) *Pool {
	if o.EjectFor <= 0 {
		o.EjectFor = 10 * time.Second
	}
	if o.Resolver == nil {
		o.Resolver = net.DefaultResolver
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Observer == nil {
		o.Observer = nopObserver{}
	}
	p := &Pool{opts: o, stop: make(chan struct{}), via: newVia(o.Pseudonym)}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	var eps []*endpoint
	resolve := false
	for _, u := range o.Upstreams {
		eps = append(eps, p.newEndpoint(u.Host))
		if net.ParseIP(u.Hostname()) == nil {
			resolve = true
		}
	}
	p.endpoints.Store(&eps)
	if resolve && o.ResolveInterval > 0 {
		p.done.Add(1)
		go p.resolveLoop()
	}
	if o.HealthCheck.Interval > 0 {
		p.done.Add(1)
		go p.healthLoop()
	}
	return p
}

// Close stops re-resolving and health checks and closes idle connections.
func (p *Pool) Close() {
	p.stopOnce.Do(func() { close(p.stop) })
	p.cancel()
	p.done.Wait()
	for _, e := range *p.endpoints.Load() {
		e.conns.Load().closeIdle()
	}
}

func (p *Pool) newEndpoint(addr string) *endpoint {
	e := &endpoint{addr: addr, obs: p.opts.Observer.Backend(addr)}
	e.conns.Store(p.newTransports(addr, time.Now()))
	return e
}

func (p *Pool) newTransports(addr string, now time.Time) *transports {
	dialer := &net.Dialer{Timeout: p.opts.DialTimeout, KeepAlive: 30 * time.Second}
	// Unary answers are small and the backend is near: neither transport
	// asks for compressed answers (compressing costs both sides more than
	// the bytes are worth, and the edge reads the answers it watches). A
	// client's own Accept-Encoding still passes through.
	t := &transports{h1: newH1(addr, p.opts.DialTimeout)}
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	t.h2 = &http.Transport{
		Protocols:          &protocols,
		DialContext:        dialer.DialContext,
		DisableCompression: true,
		// Streams are long-lived, so no response timeout here: every call
		// carries its own deadline instead.
		IdleConnTimeout: 90 * time.Second,
		HTTP2: &http.HTTP2Config{
			// Notice a dead backend connection within a minute even when idle.
			SendPingTimeout: 30 * time.Second,
			PingTimeout:     15 * time.Second,
			// What the edge buffers of a stream whose client reads slower
			// than the backend writes (docs/edge.md, slow readers).
			MaxReceiveBufferPerStream: MaxStreamBuffer,
		},
	}
	if age := p.opts.MaxConnAge; age > 0 {
		jitter := time.Duration(rand.Int64N(int64(age)/5+1)) - age/10
		t.retire = now.Add(age + jitter)
	}
	return t
}

func (t *transports) closeIdle() {
	t.h1.closeIdle()
	t.h2.CloseIdleConnections()
}

// transport returns the endpoint's transport for a call, starting a new
// generation of connections when the current one is too old. The old
// generation's calls finish on their connections, which are closed when
// idle.
func (e *endpoint) transport(p *Pool, now time.Time) *transports {
	t := e.conns.Load()
	if !t.retire.IsZero() && now.After(t.retire) {
		if fresh := p.newTransports(e.addr, now); e.conns.CompareAndSwap(t, fresh) {
			t.closeIdle()
			time.AfterFunc(30*time.Second, t.closeIdle) // what was busy a moment ago
		}
		t = e.conns.Load()
	}
	return t
}

func (e *endpoint) isEjected(now int64) bool { return e.ejected.Load() > now }

// available reports a backend that may get calls: not ejected, and
// passing its health checks.
func (e *endpoint) available(now int64) bool { return !e.isEjected(now) && !e.health.unhealthy.Load() }

// ForwardsHeader says that the pool forwards a call's header itself (see
// HeaderForwarder).
func (p *Pool) ForwardsHeader() bool { return true }

// RoundTrip sends req to one backend; if the backend refuses the
// connection (nothing was sent), to another one.
func (p *Pool) RoundTrip(req *http.Request) (*http.Response, error) {
	h2 := p.opts.HTTP2 != nil && p.opts.HTTP2(req)
	now := time.Now()
	var (
		body *retryableBody
		mem  []byte
	)
	switch {
	case req.Body == nil || req.Body == http.NoBody:
	case !h2 && req.ContentLength > 0 && req.ContentLength <= maxMemoryBody:
		// A small unary request is read first, so that the HTTP/1.1 leg
		// writes it with its headers in one system call, the backend reads
		// it in one, and a call on a connection the backend just closed
		// can be sent again (h1.roundTrip takes mem, not out.Body).
		mem = make([]byte, req.ContentLength)
		if _, err := io.ReadFull(req.Body, mem); err != nil {
			return nil, err
		}
	default:
		body = &retryableBody{ReadCloser: req.Body}
	}
	// The HTTP/1.1 leg takes the backend's address beside the request, and
	// the body in mem: req goes as it is (it writes the forwarded header
	// itself). A request for the HTTP/2 leg, or with a body read as it is
	// sent, is a copy with the backend's URL and that body, and for the
	// HTTP/2 leg the forwarded header.
	out := req
	if h2 || body != nil {
		out = new(http.Request)
		*out = *req
		u := *req.URL
		out.URL = &u
		if body != nil {
			out.Body = body
		}
		if h2 {
			if f := forwardedOf(req); f != nil {
				out.Header = f.header(req.Header) // http2's transport writes a map
			}
		}
	}
	var tried []*endpoint
	for {
		e := p.pick(now.UnixNano(), tried)
		if out != req {
			out.URL.Host = e.addr
		}
		e.inflight.Add(1)
		e.calls.Add(1)
		var (
			res *http.Response
			err error
		)
		sent := time.Now()
		if t := e.transport(p, now); h2 {
			res, err = t.h2.RoundTrip(out)
		} else {
			res, err = t.h1.roundTrip(out, e.addr, mem, p.opts.ReadOnly != nil && p.opts.ReadOnly(req))
		}
		if err == nil {
			e.obs.Called(Answered, time.Since(sent))
			e.fails.Store(0)
			res.Body = &endpointBody{ReadCloser: res.Body, e: e}
			return res, nil
		}
		e.inflight.Add(-1)
		if cerr := req.Context().Err(); cerr != nil {
			// The caller's deadline ran out or the caller left: the call
			// says nothing of the backend by itself, so it counts neither
			// way. A deadline that ran out while the backend held the call
			// asks for a health check of it now.
			e.obs.Called(Abandoned, time.Since(sent))
			if errors.Is(cerr, context.DeadlineExceeded) {
				p.suspect(e)
			}
			return nil, err
		}
		e.obs.Called(Failed, time.Since(sent))
		refused := connectionRefused(err)
		switch {
		case refused:
			p.eject(e, now, EjectedRefused, err)
		case e.fails.Add(1) >= failuresToEject:
			p.eject(e, now, EjectedFailures, err)
		}
		tried = append(tried, e)
		if !refused || (body != nil && body.read.Load()) || len(tried) >= len(*p.endpoints.Load()) {
			return nil, err
		}
		// The connection was never made: nothing reached that backend, so
		// the call goes to the next one.
	}
}

// pick returns the less busy of two backends next to each other in turn
// among those that are neither ejected nor tried yet: round robin while
// they are equally busy, away from a slow one when not. Taking the turn
// among the usable backends only spreads an ejected backend's share evenly
// over the others (skipping it in the list of all would hand its whole
// share to the one after it). When every backend is ejected, it picks
// among them all rather than failing.
func (p *Pool) pick(now int64, tried []*endpoint) *endpoint {
	eps := *p.endpoints.Load()
	if len(eps) == 1 {
		return eps[0]
	}
	turn := p.next.Add(1)
	var buf [16]*endpoint
	usable := buf[:0]
	for _, ejectedToo := range []bool{false, true} {
		for _, e := range eps {
			if !slices.Contains(tried, e) && (ejectedToo || e.available(now)) {
				usable = append(usable, e)
			}
		}
		if len(usable) > 0 {
			break
		}
	}
	switch len(usable) {
	case 0:
		return eps[turn%uint64(len(eps))]
	case 1:
		return usable[0]
	}
	i := int(turn % uint64(len(usable)))
	if len(tried) > 0 {
		// A call sent again after a refused connection: the turn has moved
		// on by the refused pick, and following it would favour the backend
		// after the refusing one in the list.
		i = rand.IntN(len(usable))
	}
	a, b := usable[i], usable[(i+1)%len(usable)]
	if b.inflight.Load() < a.inflight.Load() {
		return b
	}
	return a
}

func (p *Pool) eject(e *endpoint, now time.Time, reason string, err error) {
	until := now.Add(p.opts.EjectFor).UnixNano()
	if old := e.ejected.Load(); old < now.UnixNano() && e.ejected.CompareAndSwap(old, until) {
		p.opts.Logger.Warn("backend ejected", "backend", e.addr, "reason", reason, "for", p.opts.EjectFor, "err", err)
		e.obs.Ejected(reason)
		time.AfterFunc(p.opts.EjectFor, func() {
			if e.ejected.Load() == until {
				e.obs.EjectionOver()
			}
		})
	}
	e.fails.Store(0)
}

// NotSent reports an error of a call that no backend received: the Pool
// (or a transport of its) could open no connection to one (refused, timed
// out, a name that did not resolve), so nothing of the call was sent.
// Any other error may come after the backend received the call, on either
// leg: a connection or stream that broke, was reset or timed out once
// open, or an answer cut short.
func NotSent(err error) bool { return connectionRefused(err) }

// connectionRefused reports an error in connecting, before anything of
// the call was sent.
func connectionRefused(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// retryableBody keeps a request body open across a refused connection
// (the transport closes it on every error) and notes whether any of it was
// read, in which case the call is not sent elsewhere.
//
// The server closes the client's body when the call ends, so Close has
// nothing to do.
type retryableBody struct {
	io.ReadCloser
	read atomic.Bool
}

func (b *retryableBody) Read(p []byte) (int, error) {
	b.read.Store(true)
	return b.ReadCloser.Read(p)
}

func (b *retryableBody) Close() error { return nil }

// endpointBody counts the call in flight on its backend until the answer
// is read or closed.
type endpointBody struct {
	io.ReadCloser
	e    *endpoint
	once atomic.Bool
}

func (b *endpointBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.end()
	}
	return n, err
}

func (b *endpointBody) Close() error {
	b.end()
	return b.ReadCloser.Close()
}

func (b *endpointBody) end() {
	if b.once.CompareAndSwap(false, true) {
		b.e.inflight.Add(-1)
	}
}

// resolveLoop looks the host names up now and every ResolveInterval.
func (p *Pool) resolveLoop() {
	defer p.done.Done()
	t := time.NewTicker(p.opts.ResolveInterval)
	defer t.Stop()
	for {
		p.resolve()
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
	}
}

// resolve replaces the endpoints by every address of every upstream,
// keeping the state (connections, ejection) of those that stay. A name that
// does not resolve keeps its previous addresses.
func (p *Pool) resolve() {
	old := *p.endpoints.Load()
	byAddr := make(map[string]*endpoint, len(old))
	for _, e := range old {
		byAddr[e.addr] = e
	}
	var addrs []string
	for _, u := range p.opts.Upstreams {
		host, port := u.Hostname(), u.Port()
		if port == "" {
			port = "80"
		}
		if net.ParseIP(host) != nil {
			addrs = append(addrs, u.Host)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ips, err := p.opts.Resolver.LookupHost(ctx, host)
		cancel()
		if err != nil || len(ips) == 0 {
			p.opts.Logger.Warn("upstream name not resolved; keeping its previous addresses", "host", host, "err", err)
			for _, e := range old {
				if h, pt, _ := net.SplitHostPort(e.addr); pt == port && (h == host || net.ParseIP(h) != nil) {
					addrs = append(addrs, e.addr)
				}
			}
			continue
		}
		for _, ip := range ips {
			addrs = append(addrs, net.JoinHostPort(ip, port))
		}
	}
	slices.Sort(addrs)
	addrs = slices.Compact(addrs)
	eps := make([]*endpoint, 0, len(addrs))
	for _, a := range addrs {
		e := byAddr[a]
		if e == nil {
			e = p.newEndpoint(a)
		}
		delete(byAddr, a)
		eps = append(eps, e)
	}
	if len(eps) == 0 {
		return
	}
	p.endpoints.Store(&eps)
	for _, gone := range byAddr {
		gone.conns.Load().closeIdle()
		gone.obs.Forget()
	}
	if len(byAddr) > 0 || len(eps) != len(old) {
		p.opts.Logger.Info("upstream backends", "addrs", strings.Join(addrs, ","))
	}
}

// Backend is one backend's standing, for metrics and tests.
type Backend struct {
	Addr     string
	Calls    uint64 // calls sent to it, since start
	InFlight int64
	Ejected  bool
	// Healthy: it passes its health checks (or none run).
	Healthy bool
	// EjectedUntil: when its current ejection ends (zero: not ejected);
	// it began EjectFor before.
	EjectedUntil time.Time
	// HealthSince: when Healthy last changed (zero: never).
	HealthSince time.Time
	// LastCheck is its latest health check's result (nil: none yet).
	LastCheck *CheckResult
}

// Backends lists the current backends.
func (p *Pool) Backends() []Backend {
	now := time.Now().UnixNano()
	var out []Backend
	for _, e := range *p.endpoints.Load() {
		b := Backend{Addr: e.addr, Calls: e.calls.Load(), InFlight: e.inflight.Load(), Ejected: e.isEjected(now),
			Healthy: !e.health.unhealthy.Load(), LastCheck: e.health.last.Load()}
		if b.Ejected {
			b.EjectedUntil = time.Unix(0, e.ejected.Load())
		}
		if t := e.health.changed.Load(); t != 0 {
			b.HealthSince = time.Unix(0, t)
		}
		out = append(out, b)
	}
	return out
}
