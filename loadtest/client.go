package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Protocol is how the tool calls the API.
type Protocol string

// The protocols, as -protocol names them.
const (
	Connect     Protocol = "connect"      // Connect, binary protobuf
	ConnectJSON Protocol = "connect-json" // Connect, JSON
	GRPC        Protocol = "grpc"         // gRPC over cleartext HTTP/2 (or TLS)
	GRPCWeb     Protocol = "grpc-web"     // gRPC-Web, binary
	HTTPJSON    Protocol = "http"         // plain net/http POST of JSON, no Connect library
)

var allProtocols = []Protocol{Connect, ConnectJSON, GRPC, GRPCWeb, HTTPJSON}

func parseProtocol(s string) (Protocol, error) {
	for _, p := range allProtocols {
		if string(p) == s {
			return p, nil
		}
	}
	return "", fmt.Errorf("unknown protocol %q: want one of connect, connect-json, grpc, grpc-web, http", s)
}

// streams reports whether calls in p can be server streams.
func (p Protocol) streams() bool { return p != HTTPJSON }

// unaryErrorsInHTTPStatus reports whether p's errors are an HTTP status
// and a JSON body (Connect unary and plain JSON) rather than gRPC status.
func (p Protocol) unaryErrorsInHTTPStatus() bool {
	return p == Connect || p == ConnectJSON || p == HTTPJSON
}

// maxCapture bounds what an Exchange keeps of a body: refusals are small.
const maxCapture = 16 << 10

// callTimeout bounds one unary call.
const callTimeout = 10 * time.Second

// Exchange is what went over the wire for one call: the answer's status,
// headers, trailers and the beginning of its body. Refusal checks read it,
// so they judge the bytes the protocol carried, not a library's reading.
type Exchange struct {
	Protocol Protocol    `json:"protocol"`
	Status   int         `json:"status"`
	Header   http.Header `json:"header,omitempty"`
	Trailer  http.Header `json:"trailer,omitempty"`
	Body     []byte      `json:"body,omitempty"`

	mu  sync.Mutex
	res *http.Response
}

// finish copies the trailers, which arrive with the end of the body.
func (x *Exchange) finish() {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.res != nil {
		x.Trailer = x.res.Trailer.Clone()
		x.res = nil
	}
}

type exchangeKey struct{}

// recorder is a RoundTripper that fills the Exchange in the request's
// context, when there is one.
type recorder struct{ next http.RoundTripper }

func (r recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := r.next.RoundTrip(req)
	x, _ := req.Context().Value(exchangeKey{}).(*Exchange)
	if x == nil || res == nil {
		return res, err
	}
	x.mu.Lock()
	x.res, x.Status, x.Header = res, res.StatusCode, res.Header.Clone()
	x.mu.Unlock()
	res.Body = &capture{ReadCloser: res.Body, x: x}
	return res, err
}

type capture struct {
	io.ReadCloser
	x *Exchange
}

func (c *capture) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	if n > 0 {
		c.x.mu.Lock()
		if room := maxCapture - len(c.x.Body); room > 0 {
			c.x.Body = append(c.x.Body, p[:min(n, room)]...)
		}
		c.x.mu.Unlock()
	}
	return n, err
}

// transports are the HTTP clients of one run, closed when it ends.
type transports struct {
	http1, h2c, tls *http.Transport
}

func newTransports(maxConns int) *transports {
	dial := (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	base := func() *http.Transport {
		return &http.Transport{
			Proxy:               nil, // never through a proxy: only the addresses the user named
			DialContext:         dial,
			MaxIdleConns:        maxConns,
			MaxIdleConnsPerHost: maxConns,
			IdleConnTimeout:     30 * time.Second,
			DisableCompression:  true,
		}
	}
	t := &transports{http1: base(), h2c: base(), tls: base()}
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	t.h2c.Protocols = &p
	t.tls.ForceAttemptHTTP2 = true
	t.tls.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	return t
}

// client returns the HTTP client for calls in p to base.
func (t *transports) client(base string, p Protocol) *http.Client {
	rt := t.http1
	switch {
	case strings.HasPrefix(base, "https://"):
		rt = t.tls
	case p == GRPC:
		rt = t.h2c
	}
	return &http.Client{Transport: recorder{rt}}
}

func (t *transports) close() {
	t.http1.CloseIdleConnections()
	t.h2c.CloseIdleConnections()
	t.tls.CloseIdleConnections()
}

// Target is one address the tool calls (an edge replica or the backend) in
// one protocol.
type Target struct {
	Name string // "edge", "edge#2", "backend"
	Base string // http://host:port
	p    Protocol
	hc   *http.Client
	opts []connect.ClientOption

	mu      sync.Mutex
	clients map[string]any // procedure → *connect.Client[Req, Res]
}

func newTarget(name, base string, p Protocol, t *transports) *Target {
	tg := &Target{Name: name, Base: strings.TrimSuffix(base, "/"), p: p, hc: t.client(base, p), clients: map[string]any{}}
	switch p {
	case ConnectJSON:
		tg.opts = []connect.ClientOption{connect.WithProtoJSON()}
	case GRPC:
		tg.opts = []connect.ClientOption{connect.WithGRPC()}
	case GRPCWeb:
		tg.opts = []connect.ClientOption{connect.WithGRPCWeb()}
	}
	return tg
}

// Result is the outcome of one call.
type Result struct {
	Code   connect.Code // 0 when the call succeeded
	Reason string       // the ErrorInfo reason of an error, if any
	Err    error        // nil when the call succeeded
	X      *Exchange
}

// Outcome sorts results for counting.
type Outcome int

// Outcomes.
const (
	OK         Outcome = iota
	Refused            // resource_exhausted: a limit or quota said no
	Aborted            // aborted: an Idempotency-Key in use by a call in flight
	Failed             // any other error, or no answer
	Unfinished         // cut off when the run ended
)

func (r Result) outcome() Outcome {
	switch {
	case r.Err == nil:
		return OK
	case r.Code == connect.CodeResourceExhausted:
		return Refused
	case r.Code == connect.CodeAborted:
		return Aborted
	case errors.Is(r.Err, context.Canceled) || errors.Is(r.Err, context.DeadlineExceeded) || r.Code == connect.CodeCanceled:
		return Unfinished
	}
	return Failed
}

func resultOf(err error, x *Exchange) Result {
	r := Result{Err: err, X: x, Code: connect.CodeUnknown}
	var ce *connect.Error
	if errors.As(err, &ce) {
		r.Code, r.Reason = ce.Code(), reasonOf(ce)
	}
	return r
}

// reasonOf returns the ErrorInfo reason of an error, "" without one.
func reasonOf(ce *connect.Error) string {
	for _, d := range ce.Details() {
		if v, err := d.Value(); err == nil {
			if info, ok := v.(*errdetails.ErrorInfo); ok {
				return info.Reason
			}
		}
	}
	return ""
}

type message[T any] interface {
	*T
	proto.Message
}

// unary calls procedure on t with token as bearer token and extra headers,
// and returns the answer (nil on error) and what happened.
func unary[Req, Res any, PReq message[Req], PRes message[Res]](ctx context.Context, t *Target, procedure, token string, in PReq, header http.Header) (PRes, Result) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	x := &Exchange{Protocol: t.p}
	ctx = context.WithValue(ctx, exchangeKey{}, x)
	if t.p == HTTPJSON {
		out := PRes(new(Res))
		err := t.postJSON(ctx, procedure, token, in, out, header, x)
		x.finish()
		if err != nil {
			return nil, resultOf(err, x)
		}
		return out, Result{X: x}
	}
	t.mu.Lock()
	c, _ := t.clients[procedure].(*connect.Client[Req, Res])
	if c == nil {
		c = connect.NewClient[Req, Res](t.hc, t.Base+procedure, t.opts...)
		t.clients[procedure] = c
	}
	t.mu.Unlock()
	req := connect.NewRequest((*Req)(in))
	setHeaders(req.Header(), token, header)
	res, err := c.CallUnary(ctx, req)
	x.finish()
	if err != nil {
		return nil, resultOf(err, x)
	}
	return PRes(res.Msg), Result{X: x}
}

// serverStream opens a server stream; the caller closes it.
func serverStream[Req, Res any, PReq message[Req]](ctx context.Context, t *Target, p Protocol, procedure, token string, in PReq) (*connect.ServerStreamForClient[Res], error) {
	opts := t.opts
	if p != t.p {
		opts = nil // Connect, for a target whose own protocol cannot stream
	}
	c := connect.NewClient[Req, Res](t.hc, t.Base+procedure, opts...)
	req := connect.NewRequest((*Req)(in))
	setHeaders(req.Header(), token, nil)
	return c.CallServerStream(ctx, req)
}

func setHeaders(h http.Header, token string, extra http.Header) {
	h.Set("Authorization", "Bearer "+token)
	for k, vs := range extra {
		h[k] = vs
	}
}

// maxAnswer bounds what the plain JSON client reads.
const maxAnswer = 8 << 20

// postJSON is the plain HTTP/JSON client: what a curl user or a simple
// integration does.
func (t *Target) postJSON(ctx context.Context, procedure, token string, in, out proto.Message, header http.Header, x *Exchange) error {
	body, err := protojson.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.Base+procedure, bytes.NewReader(body))
	if err != nil {
		return err
	}
	setHeaders(req.Header, token, header)
	req.Header.Set("Content-Type", "application/json")
	res, err := t.hc.Do(req)
	if err != nil {
		return connect.NewError(connect.CodeUnavailable, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, maxAnswer))
	if err != nil {
		return connect.NewError(connect.CodeUnavailable, err)
	}
	if res.StatusCode != http.StatusOK {
		return jsonError(res.StatusCode, data)
	}
	return protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(data, out)
}

// jsonError reads an error body of the API's JSON shape into a
// *connect.Error, with its details.
func jsonError(status int, data []byte) error {
	code, _, details, err := parseJSONError(data)
	if err != nil {
		return connect.NewError(connect.CodeUnknown, fmt.Errorf("HTTP %d: %w", status, err))
	}
	var message struct {
		Message string `json:"message"`
	}
	_ = json.Unmarshal(data, &message)
	ce := connect.NewError(code, errors.New(message.Message))
	for _, d := range details {
		if ed, err := connect.NewErrorDetail(d); err == nil {
			ce.AddDetail(ed)
		}
	}
	return ce
}
