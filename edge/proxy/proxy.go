// Package proxy forwards calls to the backends in the caller's own
// protocol: bodies stream through, trailers arrive intact, hop-by-hop
// headers stay behind. gRPC calls and streams go over cleartext HTTP/2 (gRPC
// needs trailers; a stream needs each message flushed at once); every other
// call goes over pooled HTTP/1.1 connections (fasthttp's pool and answer
// reader, the request written by h1.go), which cost the backend and the
// edge less. A Pool spreads the calls over every backend and decides which
// leg a call takes.
//
// There is one forwarding path (Proxy.ServeHTTP) and one header hygiene
// (forwarded.fields, removeHopByHop) for every call; the edge supplies the
// hooks: how to read or rewrite an answer, how to answer errors.
package proxy

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/orgedge/edge/edge/wire"
)

// Options configures a proxy.
type Options struct {
	Upstream *url.URL // http://host:port; the pool picks the backend
	// Transport sends the calls (a Pool, perhaps wrapped: a wrapper that
	// keeps the call's context says so as a HeaderForwarder, and the pool
	// then forwards the header itself). Default: a Pool on Upstream alone,
	// with h2c for gRPC.
	Transport http.RoundTripper
	// DialTimeout bounds connecting to the backend, for the default
	// Transport.
	DialTimeout time.Duration
	// Stream tells a call whose answer must reach the client message by
	// message (nil: none).
	Stream func(*http.Request) bool
	// ModifyResponse and ErrorHandler are httputil.ReverseProxy's hooks.
	ModifyResponse func(*http.Response) error
	ErrorHandler   func(http.ResponseWriter, *http.Request, error)
	// Pseudonym names this edge in the Via header of each forwarded call
	// (NewPseudonym; "": none). See CameBack.
	Pseudonym string
}

// MaxStreamBuffer bounds what the proxy buffers of one answer that its
// client does not read as fast as the backend writes: the backend's HTTP/2
// flow-control window per stream.
const MaxStreamBuffer = 256 << 10

// Proxy is the reverse proxy.
type Proxy struct {
	upstream       url.URL
	transport      http.RoundTripper
	isStream       func(*http.Request) bool
	modifyResponse func(*http.Response) error
	errorHandler   func(http.ResponseWriter, *http.Request, error)
	via            via
	forwardsHeader bool // the transport is a HeaderForwarder that says so
}

// New returns the reverse proxy.
func New(o Options) *Proxy {
	if o.Transport == nil {
		o.Transport = NewPool(PoolOptions{Upstreams: []*url.URL{o.Upstream}, DialTimeout: o.DialTimeout, HTTP2: IsGRPC})
	}
	isStream := o.Stream
	if isStream == nil {
		isStream = func(*http.Request) bool { return false }
	}
	errorHandler := o.ErrorHandler
	if errorHandler == nil {
		errorHandler = func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(http.StatusBadGateway) }
	}
	hf, ok := o.Transport.(HeaderForwarder)
	return &Proxy{upstream: *o.Upstream, transport: o.Transport, isStream: isStream,
		modifyResponse: o.ModifyResponse, errorHandler: errorHandler, via: newVia(o.Pseudonym),
		forwardsHeader: ok && hf.ForwardsHeader()}
}

// ServeHTTP forwards one call, whatever its protocol: what
// httputil.ReverseProxy does for it, without what no call of this API
// needs (a deep copy of the request, 1xx answers, upgrades). The outgoing
// headers are the client's less the hop-by-hop ones, the edge's internal
// ones and any Forwarded or X-Forwarded-*, which are set from what the edge
// saw, and Via names the edge after the client's entries (see CameBack).
// An answer of unknown length (gRPC, streams) is flushed after each
// write, so that each message reaches the client at once; its trailers
// follow the body.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Two parts: what sends the call and writes the answer's headers has a
	// large stack frame, gone once it returns; what copies the answer, which
	// for a stream waits as long as the stream is open (an hour), has a
	// small one. A parked goroutine's stack shrinks at a GC to what it uses
	// (halved while it uses under a quarter): with the sender's frame still
	// below it, each open stream's handler kept a 16 KiB stack; without, 8.
	res, announced := p.send(w, r)
	if res != nil {
		p.copyAnswer(w, r, res, announced)
	}
}

// send forwards the call and writes the answer's status and headers. It
// returns the answer whose body is to be copied (nil when it answered the
// client itself) and the number of trailers the answer announced.
//
//go:noinline
func (p *Proxy) send(w http.ResponseWriter, r *http.Request) (*http.Response, int) {
	out := p.forward(r)
	u := *r.URL
	u.Scheme, u.Host = p.upstream.Scheme, p.upstream.Host
	if strings.Contains(u.RawQuery, ";") {
		q, _ := url.ParseQuery(u.RawQuery) // drops what does not parse, as ReverseProxy does
		u.RawQuery = q.Encode()
	}
	out.URL, out.Host, out.Close = &u, "", false
	if r.ContentLength == 0 {
		out.Body = nil
	}

	res, err := p.transport.RoundTrip(out)
	if err != nil {
		p.errorHandler(w, out, err)
		return nil, 0
	}
	removeHopByHop(res.Header)
	if p.modifyResponse != nil {
		if err := p.modifyResponse(res); err != nil {
			_ = res.Body.Close()
			p.errorHandler(w, out, err)
			return nil, 0
		}
	}
	dst := w.Header()
	for k, vs := range res.Header {
		if have, ok := dst[k]; ok {
			dst[k] = append(have, vs...)
		} else {
			dst[k] = vs // the answer's header is this call's own: no copy
		}
	}
	announced := len(res.Trailer)
	if announced > 0 {
		names := make([]string, 0, announced)
		for k := range res.Trailer {
			names = append(names, k)
		}
		dst.Add("Trailer", strings.Join(names, ", "))
	}
	w.WriteHeader(res.StatusCode)
	return res, announced
}

// copyAnswer copies the answer's body to the client, then its trailers.
//
//go:noinline
func (p *Proxy) copyAnswer(w http.ResponseWriter, r *http.Request, res *http.Response, announced int) {
	var to io.Writer = w
	stream := p.isStream(r)
	if res.ContentLength == -1 || stream {
		// Each message as it comes: a gRPC answer or a stream.
		rc := http.NewResponseController(w)
		_ = rc.Flush()
		to = flushWriter{w, rc}
	}
	var err error
	if stream {
		err = copyStream(to, res.Body)
	} else {
		buf := buffers.Get()
		_, err = io.CopyBuffer(to, res.Body, buf)
		buffers.Put(buf)
	}
	_ = res.Body.Close()
	if err != nil {
		// The answer is cut: the client must not take it for whole.
		panic(http.ErrAbortHandler)
	}
	copyTrailers(w.Header(), res, announced)
}

// waitSize is the buffer a stream reads into while it waits for the
// backend's next message, which it does for as long as it is open (an hour):
// a WatchEnvironment message is a few hundred bytes.
const waitSize = 256

// copyStream copies a stream's answer as it comes. Waiting, it holds only a
// waitSize buffer of its own; a read that fills it is followed by reads
// through a pooled streamBuffers buffer until one comes back short, and the
// buffer goes back to the pool: an idle stream keeps 256 B, not 2 KiB. Each
// read is written (and flushed) before the next, so nothing waits behind
// a read that blocks.
func copyStream(to io.Writer, from io.Reader) error {
	wait := make([]byte, waitSize)
	for {
		full, err := copyRead(to, from, wait)
		if full && err == nil {
			err = drain(to, from)
		}
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return err
		}
	}
}

// drain copies through a pooled buffer until a read comes back short. (No
// defer: its record would enlarge the frame a stream may wait in.)
func drain(to io.Writer, from io.Reader) error {
	buf := streamBuffers.Get()
	full, err := true, error(nil)
	for full && err == nil {
		full, err = copyRead(to, from, buf)
	}
	streamBuffers.Put(buf)
	return err
}

// copyRead reads once into buf and writes what came. full says that the
// read filled buf: more may follow at once. err is the read's or the
// write's (io.EOF at the end of the answer).
func copyRead(to io.Writer, from io.Reader, buf []byte) (full bool, err error) {
	n, rerr := from.Read(buf)
	if n > 0 {
		w, werr := to.Write(buf[:n])
		if werr == nil && w != n {
			werr = io.ErrShortWrite
		}
		if werr != nil {
			return false, werr
		}
	}
	return n == len(buf), rerr
}

// copyTrailers gives the client the answer's trailers. (Not inlined: its
// map iterators would enlarge copyAnswer's frame, which a stream keeps.)
//
//go:noinline
func copyTrailers(dst http.Header, res *http.Response, announced int) {
	if len(res.Trailer) == announced {
		for k, vs := range res.Trailer {
			dst[k] = append(dst[k], vs...)
		}
		return
	}
	for k, vs := range res.Trailer { // some came unannounced
		dst[http.TrailerPrefix+k] = append(dst[http.TrailerPrefix+k], vs...)
	}
}

// flushWriter flushes each write: a message of a stream or of a gRPC
// answer reaches the client at once.
type flushWriter struct {
	w  io.Writer
	rc *http.ResponseController
}

func (f flushWriter) Write(b []byte) (int, error) {
	n, err := f.w.Write(b)
	if err != nil {
		return n, err
	}
	return n, f.rc.Flush()
}

// hopByHop are the headers of one connection, not of the call (RFC 9110
// 7.6.1), and those net/http handles itself.
var hopByHop = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// isHopByHop reports a name in hopByHop. A switch, not a map: a map of
// more than 8 names hashes each name it is asked for.
// TestHeaderSwitchesAgreeWithTheirLists holds it to hopByHop.
func isHopByHop(k string) bool {
	switch k {
	case "Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
		"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade":
		return true
	}
	return false
}

// dropped reports a request header never forwarded as the client sent
// it: a hop-by-hop one, Forwarded and X-Forwarded-* (the proxy sets them
// from what it saw), and the headers only the edge may set
// (Idempotent-Replayed, X-Edge-Subject, X-Edge-Plan).
func dropped(k string) bool {
	switch k {
	case "Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto",
		"Idempotent-Replayed", "X-Edge-Subject", "X-Edge-Plan":
		return true
	}
	return isHopByHop(k)
}

// removeHopByHop removes an answer's hop-by-hop headers.
func removeHopByHop(h http.Header) {
	for _, c := range h["Connection"] {
		for _, name := range strings.Split(c, ",") {
			if name = textproto.TrimString(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, k := range hopByHop {
		delete(h, k)
	}
}

// IsGRPC reports a gRPC call (not gRPC-Web), which needs HTTP/2 to the
// backend for its trailers.
func IsGRPC(r *http.Request) bool {
	m, ok := wire.MediaOf(r.Header)
	return ok && m.Protocol == wire.GRPC
}

// buffers are the copy buffers of the proxies: without a pool, ReverseProxy
// allocates 32 KiB per call.
var buffers = &bufferPool{pool: sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}}

// streamBuffers are the copy buffers of streams' messages (see
// copyStream). 32 KiB per open stream was once most of the edge's memory per
// stream; a message larger than these is copied in several reads, each
// flushed as it comes.
var streamBuffers = &bufferPool{pool: sync.Pool{New: func() any { b := make([]byte, 2<<10); return &b }}}

type bufferPool struct{ pool sync.Pool }

func (b *bufferPool) Get() []byte  { return *b.pool.Get().(*[]byte) }
func (b *bufferPool) Put(x []byte) { b.pool.Put(&x) }

// Deadline returns how long a call may run: the client's timeout
// (grpc-timeout or connect-timeout-ms) capped at max, or max when the client
// sets none or an invalid one. The call's own header is left as the client
// sent it; the forwarded call carries what is left (see WithDeadline).
func Deadline(r *http.Request, c wire.Call, max time.Duration) time.Duration {
	d := max
	if grpcTimeout(c) {
		if t, ok := parseGRPCTimeout(wire.FirstValue(r.Header["Grpc-Timeout"])); ok && t < d {
			d = t
		}
		return d
	}
	if v := wire.FirstValue(r.Header["Connect-Timeout-Ms"]); v != "" && len(v) <= 10 {
		if ms, err := strconv.ParseInt(v, 10, 64); err == nil && ms > 0 {
			if t := time.Duration(ms) * time.Millisecond; t < d {
				d = t
			}
		}
	}
	return d
}

// grpcTimeout says whether c's protocol carries its timeout in Grpc-Timeout
// (else in Connect-Timeout-Ms).
func grpcTimeout(c wire.Call) bool {
	return c.Protocol == wire.GRPC || c.Protocol == wire.GRPCWeb
}

type deadlineKey struct{}

// callDeadline is when a call must end, and the header its protocol says
// it in.
type callDeadline struct {
	at   time.Time
	grpc bool
}

// WithDeadline records when the call c must end. The proxy then forwards,
// in c's protocol's timeout header, what is left of it when the call leaves
// for the backend, so that the time spent in the edge counts and the
// backend ends the call in the caller's protocol when time runs out.
func WithDeadline(ctx context.Context, c wire.Call, deadline time.Time) context.Context {
	return context.WithValue(ctx, deadlineKey{}, callDeadline{at: deadline, grpc: grpcTimeout(c)})
}

// parseGRPCTimeout reads "<1-8 digits><unit>" with unit one of H M S m u n.
func parseGRPCTimeout(s string) (time.Duration, bool) {
	if len(s) < 2 || len(s) > 9 {
		return 0, false
	}
	n, err := strconv.ParseInt(s[:len(s)-1], 10, 64)
	if err != nil || n <= 0 || strings.ContainsAny(s[:len(s)-1], "+-") {
		return 0, false
	}
	var unit time.Duration
	switch s[len(s)-1] {
	case 'H':
		unit = time.Hour
	case 'M':
		unit = time.Minute
	case 'S':
		unit = time.Second
	case 'm':
		unit = time.Millisecond
	case 'u':
		unit = time.Microsecond
	case 'n':
		unit = time.Nanosecond
	default:
		return 0, false
	}
	if n > int64((1<<63-1)/unit) {
		return 1<<63 - 1, true
	}
	return time.Duration(n) * unit, true
}
