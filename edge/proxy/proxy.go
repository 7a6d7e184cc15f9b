// Package proxy forwards calls to the backend over cleartext HTTP/2, in the
// caller's own protocol: bodies stream through unbuffered, trailers arrive
// intact, hop-by-hop headers stay behind. It is an httputil.ReverseProxy with
// its hooks set; the edge supplies how to answer errors.
package proxy

import (
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/orgedge/edge/edge/classify"
)

// Options configures a proxy.
type Options struct {
	Upstream    *url.URL      // http://host:port
	DialTimeout time.Duration // bound on connecting to the backend
	// ModifyResponse and ErrorHandler are httputil.ReverseProxy's hooks.
	ModifyResponse func(*http.Response) error
	ErrorHandler   func(http.ResponseWriter, *http.Request, error)
}

// internalHeaders are request headers that only the edge may set; a
// client's are removed before forwarding.
var internalHeaders = []string{"Idempotent-Replayed", "X-Edge-Subject", "X-Edge-Plan"}

// MaxStreamBuffer bounds what the proxy buffers of one answer that its
// client does not read as fast as the backend writes: the backend's HTTP/2
// flow-control window per stream.
const MaxStreamBuffer = 256 << 10

// New returns the reverse proxy.
func New(o Options) *httputil.ReverseProxy {
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	dialer := &net.Dialer{Timeout: o.DialTimeout, KeepAlive: 30 * time.Second}
	transport := &http.Transport{
		Protocols:   &protocols,
		DialContext: dialer.DialContext,
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
	upstream := *o.Upstream
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(&upstream)
			// ReverseProxy has dropped the client's X-Forwarded-* already:
			// they are hostile. Set them from what the edge saw.
			pr.SetXForwarded()
			for _, h := range internalHeaders {
				pr.Out.Header.Del(h)
			}
			forwardTimeout(pr.In.Context(), pr.Out.Header)
		},
		Transport:      transport,
		FlushInterval:  -1, // every message reaches the client at once
		ModifyResponse: o.ModifyResponse,
		ErrorHandler:   o.ErrorHandler,
	}
}

// Deadline returns how long a call may run: the client's timeout
// (grpc-timeout or connect-timeout-ms) capped at max, or max when the client
// sets none or an invalid one. It rewrites the request's timeout header to
// the result, so that the backend ends the call in the caller's protocol
// when time runs out.
func Deadline(r *http.Request, c classify.Call, max time.Duration) time.Duration {
	d := max
	switch c.Protocol {
	case classify.GRPC, classify.GRPCWeb:
		if t, ok := parseGRPCTimeout(r.Header.Get("Grpc-Timeout")); ok && t < d {
			d = t
		}
		r.Header.Set("Grpc-Timeout", strconv.FormatInt(max64(d.Milliseconds(), 1), 10)+"m")
	default:
		if ms, err := strconv.ParseInt(r.Header.Get("Connect-Timeout-Ms"), 10, 64); err == nil && ms > 0 && len(r.Header.Get("Connect-Timeout-Ms")) <= 10 {
			if t := time.Duration(ms) * time.Millisecond; t < d {
				d = t
			}
		}
		r.Header.Set("Connect-Timeout-Ms", strconv.FormatInt(max64(d.Milliseconds(), 1), 10))
	}
	return d
}

type deadlineKey struct{}

// WithDeadline records when the call must end. The proxy then forwards, in
// the timeout header that Deadline set, what is left of it when the call
// leaves for the backend, so that the time spent in the edge counts.
func WithDeadline(ctx context.Context, deadline time.Time) context.Context {
	return context.WithValue(ctx, deadlineKey{}, deadline)
}

// forwardTimeout rewrites the timeout header Deadline set to what is left
// of the call's deadline.
func forwardTimeout(ctx context.Context, h http.Header) {
	deadline, ok := ctx.Value(deadlineKey{}).(time.Time)
	if !ok {
		return
	}
	ms := max64(time.Until(deadline).Milliseconds(), 1)
	if h.Get("Grpc-Timeout") != "" {
		h.Set("Grpc-Timeout", strconv.FormatInt(ms, 10)+"m")
	}
	if h.Get("Connect-Timeout-Ms") != "" {
		h.Set("Connect-Timeout-Ms", strconv.FormatInt(ms, 10))
	}
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
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
