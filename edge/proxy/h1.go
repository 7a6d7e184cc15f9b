package proxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
)

// MaxUnaryAnswer bounds a unary answer read from a backend over HTTP/1.1:
// such an answer is read whole before it is passed on (the proxy then
// writes it in one go). A larger one fails the call with an error, as an
// unreachable backend does.
const MaxUnaryAnswer = 32 << 20

// maxUnaryTimeout is the longest a call without a deadline of its own may
// wait for its answer. Every call the edge forwards has one
// (requests.max_*_timeout); this is a backstop.
const maxUnaryTimeout = 10 * time.Minute

// errAnswerTooLarge is a unary answer over MaxUnaryAnswer.
var errAnswerTooLarge = fmt.Errorf("the backend's answer is over %d bytes", MaxUnaryAnswer)

// h1 sends unary calls to one backend over pooled HTTP/1.1 connections.
//
// It is net/http's RoundTripper contract on fasthttp's connection pool and
// answer reader, the request written by h1Call.write: the call is written
// and its answer read on the caller's goroutine, with no reader and writer
// goroutines per connection and no header maps for the wire. Against
// http.Transport this halves what the edge spends on a unary call's hop to
// the backend (docs/benchmarks.md).
// Its own parts are what fasthttp's client leaves out: the call's context
// (a cancelled call or a passed deadline closes its connection, so the
// backend sees the call end), and the answer as an *http.Response.
type h1 struct {
	hc *fasthttp.HostClient
}

func newH1(addr string, dialTimeout time.Duration) *h1 {
	dialer := &net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}
	return &h1{hc: &fasthttp.HostClient{
		Addr: addr,
		Dial: func(addr string) (net.Conn, error) {
			c, err := dialer.Dial("tcp", addr)
			if err != nil {
				return nil, err
			}
			return newBackendConn(c), nil
		},
		// No limit of their own beyond the backend's: as many connections
		// as calls in flight, as http.Transport does.
		MaxConns:                      1 << 16,
		MaxIdleConnDuration:           90 * time.Second,
		MaxResponseBodySize:           MaxUnaryAnswer,
		NoDefaultUserAgentHeader:      true,
		DisableHeaderNamesNormalizing: true,
		DisablePathNormalizing:        true,
	}}
}

// closeIdle closes the idle connections.
func (t *h1) closeIdle() { t.hc.CloseIdleConnections() }

// notWritten reports the headers h1 does not copy: the hop-by-hop ones
// (httputil.ReverseProxy and serveWhole have removed them already; a direct
// caller may not have), Expect (the whole body goes at once, so nothing
// waits for 100 Continue), and those the call's framing sets.
func notWritten(k string) bool {
	switch k {
	case "Expect", "Content-Length", "Host":
		return true
	}
	return isHopByHop(k)
}

// roundTrip sends r to the backend at addr (its Host when r has none). r's
// body is mem when mem is not nil: it can then be sent again on a fresh
// connection if a pooled one turns out closed. readOnly tells a call
// without side effects, which may be sent again even when the backend may
// have received it.
func (t *h1) roundTrip(r *http.Request, addr string, mem []byte, readOnly bool) (*http.Response, error) {
	host := r.Host
	if host == "" {
		host = addr // the backend's
	}
	c := &h1Call{r: r, host: host, mem: mem}

	// The call's context ends it (its deadline or its client leaving: the
	// connection is cut, exchange); the connection's own deadline, one to
	// two seconds later (setBackstop), is a backstop.
	ctx := r.Context()
	deadline, ok := ctx.Deadline()
	if ok {
		deadline = deadline.Add(time.Second)
	} else {
		deadline = time.Now().Add(maxUnaryTimeout)
	}
	res := fasthttp.AcquireResponse()
	res.Header.SetNoDefaultContentType(true)
	res.SkipBody = r.Method == http.MethodHead
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			fasthttp.ReleaseResponse(res)
			return nil, err
		}
		reused, wrote, err := t.exchange(ctx, c, res, deadline)
		if err == nil {
			break
		}
		// A pooled connection that the backend closed just before the call
		// (an idle one it closed a while ago is noticed before use) fails
		// before any answer. The call is sent again on a new connection if
		// its body can be, and if that cannot make it act twice: the call
		// did not leave whole, or it has no side effects. An
		// Idempotency-Key is no reason (http.Transport takes it for one):
		// the backend does not deduplicate, and the edge's idempotency
		// step would see no second call.
		if reused && attempt == 0 && (mem != nil || noBody(r)) && closedBeforeAnswer(err) &&
			(!wrote || readOnly) {
			continue
		}
		fasthttp.ReleaseResponse(res)
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		return nil, err
	}
	return toResponse(r, res), nil
}

// exchange writes req on a pooled connection and reads its answer,
// closing the connection if ctx ends first. reused tells whether the
// connection had served calls before, wrote whether the call left whole.
func (t *h1) exchange(ctx context.Context, c *h1Call, res *fasthttp.Response, deadline time.Time) (reused, wrote bool, err error) {
	// A pooled connection idle for a while is checked first: the backend
	// may have closed it meanwhile (its idle timeout).
	cc, err := t.hc.AcquireConn(time.Until(deadline), false)
	for tries := 0; err == nil && tries < 8; tries++ {
		last := cc.LastUseTime()
		if last.IsZero() || time.Since(last) < idleCheckAfter || !closedWhileIdle(cc.Conn()) {
			break
		}
		t.hc.CloseConn(cc)
		cc, err = t.hc.AcquireConn(time.Until(deadline), false)
	}
	if err != nil {
		return false, false, err
	}
	conn := cc.Conn()
	reused = !cc.LastUseTime().IsZero()
	if err := setBackstop(conn, deadline); err != nil {
		t.hc.CloseConn(cc)
		return reused, false, err
	}
	stop := context.AfterFunc(ctx, cutterOf(conn))
	bw := t.hc.AcquireWriter(conn)
	err = c.write(bw)
	if err == nil {
		err = bw.Flush()
	}
	t.hc.ReleaseWriter(bw)
	if err == nil {
		wrote = true
		br := t.hc.AcquireReader(conn)
		err = res.ReadLimitBody(br, MaxUnaryAnswer)
		t.hc.ReleaseReader(br)
	}
	if !stop() || err != nil || res.ConnectionClose() {
		// The context ended (the connection may be cut), or the
		// connection is not fit for another call.
		t.hc.CloseConn(cc)
	} else {
		t.hc.ReleaseConn(cc)
	}
	if errors.Is(err, fasthttp.ErrBodyTooLarge) {
		err = errAnswerTooLarge
	}
	return reused, wrote, err
}

// backendConn is a connection to a backend that remembers the deadline
// setBackstop gave it last. Only the call that holds the connection reads
// or sets it.
type backendConn struct {
	net.Conn
	backstop time.Time
	// cut ends the call on the connection (see cutterOf): made once with
	// the connection, not on every call.
	cut func()
}

func newBackendConn(c net.Conn) *backendConn {
	return &backendConn{Conn: c, cut: cutter(c)}
}

// SyscallConn is the connection's own, for closedWhileIdle.
func (c *backendConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.ErrUnsupported
	}
	return sc.SyscallConn()
}

// backstopSlack is how much later than a call needs its connection's
// deadline may be: the deadline is set again only when it is earlier than
// the call's backstop, or later by more than this. So calls a moment apart
// on one connection share a deadline, where setting it on each call
// changed two of the runtime's timers.
const backstopSlack = time.Second

// setBackstop gives conn a deadline from need to need+backstopSlack.
func setBackstop(conn net.Conn, need time.Time) error {
	bc, ok := conn.(*backendConn)
	if !ok {
		return conn.SetDeadline(need)
	}
	if !bc.backstop.Before(need) && !bc.backstop.After(need.Add(backstopSlack)) {
		return nil
	}
	at := need.Add(backstopSlack)
	if err := bc.Conn.SetDeadline(at); err != nil {
		return err
	}
	bc.backstop = at
	return nil
}

// idleCheckAfter is how long a pooled connection must have been idle for
// exchange to check that the backend has not closed it meanwhile (one
// non-blocking peek). Busy connections are not checked: the check is a
// system call, and a connection in use a moment ago is very likely open.
var idleCheckAfter = time.Second

// cutterOf returns what cuts conn from the context's goroutine when a
// call's context ends. A connection that was cut is closed, never used
// again (exchange), so a backendConn's cut, made with it, serves all its
// calls; another connection gets one per call.
func cutterOf(conn net.Conn) func() {
	if bc, ok := conn.(*backendConn); ok {
		return bc.cut
	}
	return cutter(conn)
}

// cutter returns a function that cuts conn once: its deadline in the past
// makes the call's read or write return at once.
func cutter(conn net.Conn) func() {
	var once sync.Once
	return func() { once.Do(func() { _ = conn.SetDeadline(time.Unix(1, 0)) }) }
}

// closedBeforeAnswer reports an error of a connection that ended before
// any of the answer arrived.
func closedBeforeAnswer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, fasthttp.ErrConnectionClosed) ||
		errors.Is(err, net.ErrClosed) || isReset(err)
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && (op.Op == "read" || op.Op == "write") && !op.Timeout()
}

// toResponse turns fasthttp's answer into net/http's, hop-by-hop headers
// included, as http.Transport does (the proxy removes them). The answer's
// body stays in res until the response's Body is closed.
func toResponse(r *http.Request, res *fasthttp.Response) *http.Response {
	n := res.Header.Len() + 1
	h := make(http.Header, n)
	// One array holds every value: a header's slice is a window of it, with
	// no room to grow into the next one's.
	values := make([]string, 0, n)
	// And every value, and every name not in commonHeaders, is a window of
	// one string: one allocation for them all, not one each.
	type field struct {
		key            string // a common name, in canonical form; else k0:k1 of text
		k0, k1, v0, v1 int
	}
	var spans [16]field
	fields := spans[:0]
	size := 0
	for k, v := range res.Header.All() {
		size += len(k) + len(v)
	}
	var text strings.Builder
	text.Grow(size)
	for k, v := range res.Header.All() {
		// fasthttp normalizes answers' header names: a common one is
		// found as it is.
		f := field{key: commonHeaders[string(k)]}
		if f.key == "" {
			f.k0 = text.Len()
			text.Write(k)
			f.k1 = text.Len()
		}
		f.v0 = text.Len()
		text.Write(v)
		f.v1 = text.Len()
		fields = append(fields, f)
	}
	all := text.String()
	for _, f := range fields {
		key := f.key
		if key == "" {
			key = all[f.k0:f.k1]
		}
		if key == "Transfer-Encoding" || key == "Content-Length" {
			continue // the body is whole: its length is set below
		}
		value := all[f.v0:f.v1]
		if vs, ok := h[key]; ok {
			h[key] = append(vs, value)
			continue
		}
		values = append(values, value)
		i := len(values)
		h[key] = values[i-1 : i : i]
	}
	body := res.Body()
	values = append(values, strconv.Itoa(len(body)))
	i := len(values)
	h["Content-Length"] = values[i-1 : i : i]
	code := res.StatusCode()
	status, ok := statusLines[code]
	if !ok {
		status = strconv.Itoa(code) + " " + http.StatusText(code)
	}
	// The response and its body in one allocation.
	a := &struct {
		out  http.Response
		body answerBody
	}{out: http.Response{
		Status:        status,
		StatusCode:    code,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		ContentLength: int64(len(body)),
		Request:       r,
	}}
	a.body.res = res
	a.body.Reader.Reset(body)
	a.out.Body = &a.body
	return &a.out
}

// commonHeaders are the header names of usual answers, so that their keys
// are not made anew for each answer.
var commonHeaders = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{"Accept-Encoding", "Cache-Control", "Connect-Accept-Encoding", "Connect-Content-Encoding",
		"Content-Encoding", "Content-Type", "Date", "Etag", "Grpc-Accept-Encoding", "Grpc-Encoding", "Grpc-Message",
		"Grpc-Status", "Location", "Retry-After", "Server", "Vary", "X-Content-Type-Options", "X-Request-Id"} {
		m[k] = k
	}
	return m
}()

// statusLines are the Status of answers with a known code.
var statusLines = func() map[int]string {
	m := map[int]string{}
	for code := 100; code < 600; code++ {
		if t := http.StatusText(code); t != "" {
			m[code] = strconv.Itoa(code) + " " + t
		}
	}
	return m
}()

// answerBody reads an answer held by fasthttp, and gives it back on Close.
type answerBody struct {
	bytes.Reader
	res  *fasthttp.Response
	once sync.Once
}

func (b *answerBody) Close() error {
	b.once.Do(func() {
		b.Reader.Reset(nil)
		fasthttp.ReleaseResponse(b.res)
	})
	return nil
}

// h1Call is a call as h1 writes it: r's method, target, header and body
// (mem when read already), for Host host.
type h1Call struct {
	r    *http.Request
	host string
	mem  []byte
}

// noBody reports a request without a body.
func noBody(r *http.Request) bool { return r.Body == nil || r.Body == http.NoBody }

// errShortBody is a request body that ended before its Content-Length.
var errShortBody = errors.New("the request's body ended before its Content-Length")

// write writes the call to a backend's connection: its request line, Host,
// its header (the forwarded one, see forwarded.fields, for a call that
// came through a Proxy) less what notWritten names, and its body, with its
// length, or chunked when the length is unknown. The header goes from r's
// map straight to the connection's buffer, with no copy in between; a
// value or name holding a line break (none that net/http read can, but
// the edge sets some itself) has it replaced by a space, so that nothing
// can add a header or a call.
func (c *h1Call) write(bw *bufio.Writer) error {
	// The head is appended in the buffer's free space (one copy of each
	// name and value, into the buffer itself, when it fits) and written at
	// once.
	r := c.r
	b := bw.AvailableBuffer()
	b = append(append(append(b, r.Method...), ' '), r.URL.RequestURI()...)
	b = appendSafe(append(b, " HTTP/1.1\r\nHost: "...), c.host)
	b = append(b, "\r\n"...)
	field := func(k string, vs []string) {
		switch {
		case notWritten(k) || len(vs) == 0:
		case k == "Cookie" && len(vs) > 1:
			// One Cookie line (RFC 6265 5.4), as HTTP/2 clients' split
			// cookies are joined for HTTP/1.1 (RFC 9113 8.2.3).
			b = appendField(b, k, strings.Join(vs, "; "))
		default:
			for _, v := range vs {
				b = appendField(b, k, v)
			}
		}
	}
	if f := forwardedOf(r); f != nil {
		f.fields(r.Header, field)
	} else {
		for k, vs := range r.Header {
			field(k, vs)
		}
	}
	var body io.Reader
	switch {
	case c.mem != nil:
		b = appendLength(b, int64(len(c.mem)))
	case !noBody(r):
		body = r.Body
		if r.ContentLength > 0 {
			b = appendLength(b, r.ContentLength)
		} else {
			b = append(b, "Transfer-Encoding: chunked\r\n"...)
		}
	case r.Method != http.MethodGet && r.Method != http.MethodHead:
		b = appendLength(b, 0) // a POST says it has no body
	}
	_, err := bw.Write(append(b, "\r\n"...))
	switch {
	case err != nil:
	case c.mem != nil:
		_, err = bw.Write(c.mem)
	case body == nil:
	case r.ContentLength > 0:
		var n int64
		n, err = io.CopyN(bw, body, r.ContentLength)
		if err == io.EOF || (err == nil && n < r.ContentLength) {
			err = errShortBody
		}
	default:
		cw := httputil.NewChunkedWriter(bw)
		if _, err = io.Copy(cw, body); err == nil {
			err = cw.Close() // the last chunk
		}
		if err == nil {
			_, err = bw.WriteString("\r\n") // and no trailers
		}
	}
	return err
}

// appendLength appends a Content-Length field.
func appendLength(b []byte, n int64) []byte {
	return append(strconv.AppendInt(append(b, "Content-Length: "...), n, 10), "\r\n"...)
}

// appendField appends one header field.
func appendField(b []byte, k, v string) []byte {
	b = append(appendSafe(b, k), ": "...)
	return append(appendSafe(b, v), "\r\n"...)
}

// appendSafe appends s with each CR and LF in it replaced by a space.
func appendSafe(b []byte, s string) []byte {
	n := len(b)
	b = append(b, s...)
	if strings.IndexByte(s, '\n') < 0 && strings.IndexByte(s, '\r') < 0 {
		return b
	}
	for i := n; i < len(b); i++ {
		if b[i] == '\r' || b[i] == '\n' {
			b[i] = ' '
		}
	}
	return b
}
