// Package health answers gRPC's health service (grpc.health.v1.Health) on
// the API listener, so that grpc-health-probe, grpcurl, grpc-go's health
// client and Kubernetes' gRPC probes aimed at the API port learn whether
// the edge can serve: SERVING when every readiness check of the admin
// listener's /readyz passes (edge/admin.NotReady), NOT_SERVING otherwise.
// Check answers once; Watch streams the status, at once and at each change.
//
// It is only the answer: the chain brings a health call here after
// classification, the body's bounds, the calls in flight, the access line
// and the metrics, in place of the backend, without a token (edge/policy
// gives it an open rule). It is not the admin listener's probes, which
// stay where they are, and it says nothing of the backends: the edge keeps
// serving, with 503 UPSTREAM_UNAVAILABLE, while they are away.
package health

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/edge/admin"
	"github.com/orgedge/edge/edge/authn"
	"github.com/orgedge/edge/edge/call"
)

// MaxMessageBytes bounds one health request message: it names a service,
// a few dozen bytes.
const MaxMessageBytes = 4 << 10

// Reuse is how long one run of the checks answers every health call: a
// probe needs no fresher answer, and calls without a token must not turn
// into as many calls to the issuer and Redis. It is also how often an open
// Watch looks for a change.
const Reuse = time.Second

// Bounds of the open Watch streams, which need no token and hold no
// subject's stream cap: per client address (a grpc-go client watches once
// per connection to the edge), and per replica.
const (
	MaxWatchesPerAddress = 16
	MaxWatches           = 1024
)

// Options are what the health service needs.
type Options struct {
	// Checks decide readiness, as they decide /readyz.
	Checks []admin.Check
	// MaxBytes bounds one request message (requests.max_body_bytes), at
	// most MaxMessageBytes.
	MaxBytes int64
	// ClientAddress is the address of a call's client (behind the trusted
	// proxies), by which open Watch streams are bounded (default: the
	// socket peer).
	ClientAddress func(*http.Request) netip.Addr
}

// Service is the handler of the health service's procedures: Check and
// Watch, for the whole edge (service "") or one of the API's services,
// which the edge serves or not as a whole.
type Service struct {
	check, watch http.Handler
	checker      *checker
	clientAddr   func(*http.Request) netip.Addr

	// ending closes when the edge shuts down (EndWatches).
	ending  chan struct{}
	endOnce sync.Once

	mu     sync.Mutex
	open   int                // Watch streams open
	byAddr map[netip.Addr]int // of them, per client address
}

// New returns the health service.
func New(o Options) *Service {
	c := &checker{checks: o.Checks}
	for _, p := range config.Procedures() {
		if !slices.Contains(c.services, p.Service) {
			c.services = append(c.services, p.Service)
		}
	}
	read := connect.WithReadMaxBytes(int(min(o.MaxBytes, MaxMessageBytes)))
	if o.ClientAddress == nil {
		o.ClientAddress = authn.ClientAddress{}.Of // no proxy trusted: the socket peer
	}
	s := &Service{checker: c, clientAddr: o.ClientAddress, ending: make(chan struct{}), byAddr: map[netip.Addr]int{}}
	_, s.check = grpchealth.NewHandler(c, read)
	s.watch = newWatchHandler(s, read)
	return s
}

// ServeHTTP answers a call of Check or Watch.
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == watchProcedure {
		wt := &watcher{addr: s.clientAddr(r), rec: call.Of(r).Rec}
		s.watch.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), watcherKey{}, wt)))
		return
	}
	s.check.ServeHTTP(w, r)
}

// EndWatches ends every open Watch stream, and every one opened from now
// on, with unavailable (reason EDGE_SHUTTING_DOWN): the edge is shutting
// down, and the watcher reconnects to another replica.
func (s *Service) EndWatches() { s.endOnce.Do(func() { close(s.ending) }) }

// checker runs the checks at most once per Reuse, whoever asks.
type checker struct {
	checks   []admin.Check
	services []string

	mu     sync.Mutex
	ranAt  time.Time
	status grpchealth.Status
}

func (c *checker) Check(ctx context.Context, req *grpchealth.CheckRequest) (*grpchealth.CheckResponse, error) {
	if !c.serves(req.Service) {
		return nil, connect.NewError(connect.CodeNotFound, errors.New("unknown service "+req.Service))
	}
	return &grpchealth.CheckResponse{Status: c.current(ctx)}, nil
}

// serves reports a service the edge answers for: "" (the edge) or one of
// the API's.
func (c *checker) serves(service string) bool {
	return service == "" || slices.Contains(c.services, service)
}

// current is the edge's status, from a run of the checks at most Reuse old.
func (c *checker) current(ctx context.Context) grpchealth.Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.ranAt) >= Reuse {
		// Not the caller's context: the answer serves the callers that
		// wait meanwhile too, and NotReady bounds it in time.
		c.status = grpchealth.StatusServing
		if len(admin.NotReady(context.WithoutCancel(ctx), c.checks)) > 0 {
			c.status = grpchealth.StatusNotServing
		}
		c.ranAt = time.Now()
	}
	return c.status
}
