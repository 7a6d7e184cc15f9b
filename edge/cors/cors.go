// Package cors lets pages on other origins call the API from a browser. It
// wraps the chain (only conns' connection bounds come before it): it
// answers CORS preflights (OPTIONS with Origin and
// Access-Control-Request-Method) itself, before authentication, so that
// a preflight is never forwarded nor charged to any subject, and bounds them
// per client address; it adds Access-Control-Allow-Origin and
// Access-Control-Expose-Headers to every other answer to an allowed origin,
// the edge's own refusals included.
//
// The CORS protocol itself is github.com/rs/cors; the headers every
// protocol needs are connectrpc.com/cors's; this package adds the API's own
// headers, the installation's origins (config.CORS, swapped whole on a
// reload) and the preflight bound. It decides nothing about who may call:
// CORS only tells browsers which pages may read the answers.
package cors

import (
	"math"
	"net/http"
	"net/netip"
	"strconv"
	"sync/atomic"
	"time"

	connectcors "connectrpc.com/cors"
	rscors "github.com/rs/cors"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/edge/authn"
)

// AllowedHeaders are the request headers a page may send: every protocol's
// (connectrpc.com/cors) and the API's own.
var AllowedHeaders = append(connectcors.AllowedHeaders(),
	"Authorization", "Idempotency-Key", "Traceparent", "Tracestate", "X-Request-Id")

// ExposedHeaders are the answer's headers a page may read beyond the
// CORS-safelisted ones: every protocol's (grpc-status, ...) and the API's
// own (rate limits, retries, replays, the request id).
var ExposedHeaders = append(connectcors.ExposedHeaders(),
	"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "RateLimit", "RateLimit-Policy",
	"Retry-After", "Grpc-Retry-Pushback-Ms", "Idempotent-Replayed", "X-Request-Id", "WWW-Authenticate")

// Step is the CORS step. Its policy may be swapped while it serves (Set).
type Step struct {
	address authn.ClientAddress
	policy  atomic.Pointer[policy]
}

// policy is one configuration's CORS, never changed once built.
type policy struct {
	c          config.CORS
	cors       *rscors.Cors        // nil: CORS off (no allowed origin)
	preflights *authn.AddressLimit // nil: preflights unbounded
}

// New returns the step for c, telling a call's client address (for the
// preflight bound) with address.
func New(c config.CORS, address authn.ClientAddress) *Step {
	s := &Step{address: address}
	s.Set(c)
	return s
}

// Set makes c the CORS of every request from now on. The preflight
// buckets are kept unless c changes their size or rate.
func (s *Step) Set(c config.CORS) {
	p := &policy{c: c}
	if len(c.AllowedOrigins) > 0 {
		p.cors = rscors.New(rscors.Options{
			AllowedOrigins:   c.AllowedOrigins,
			AllowedMethods:   connectcors.AllowedMethods(),
			AllowedHeaders:   AllowedHeaders,
			ExposedHeaders:   ExposedHeaders,
			MaxAge:           int(math.Ceil(c.MaxAge.Seconds())),
			AllowCredentials: c.AllowCredentials,
		})
	}
	old := s.policy.Load()
	switch pl := c.PreflightLimit; {
	case pl.PerMinute <= 0:
	case old != nil && old.c.PreflightLimit == pl && old.preflights != nil:
		p.preflights = old.preflights
	default:
		p.preflights = authn.NewAddressLimit(pl.PerMinute, pl.Burst)
	}
	s.policy.Store(p)
}

// take takes a preflight's token from addr's bucket; an address that
// cannot be read (no socket peer) is not bounded, as for authentication.
func (p *policy) take(addr netip.Addr) time.Duration {
	if !addr.IsValid() {
		return 0
	}
	return p.preflights.Take(addr)
}

// Wrap returns next behind the step: preflights are answered here, other
// requests go to next with the CORS headers their origin gets.
func (s *Step) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := s.policy.Load()
		if p.cors == nil {
			next.ServeHTTP(w, r)
			return
		}
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			if s.preflightRefused(w, r, p) {
				return
			}
			r = withRequestHeadersInOrder(r)
		}
		p.cors.ServeHTTP(w, r, next.ServeHTTP)
	})
}

// preflightRefused answers a preflight past its address's bound. (Apart
// from Wrap's handler, whose frame stays on an open stream's stack: see
// proxy.Proxy.ServeHTTP.)
//
//go:noinline
func (s *Step) preflightRefused(w http.ResponseWriter, r *http.Request, p *policy) bool {
	if p.preflights == nil {
		return false
	}
	wait := p.take(s.address.Of(r))
	if wait <= 0 {
		return false
	}
	w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
	w.WriteHeader(http.StatusTooManyRequests)
	return true
}
