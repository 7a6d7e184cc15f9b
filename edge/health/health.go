// Package health answers gRPC's health service (grpc.health.v1.Health) on
// the API listener, so that grpc-health-probe, grpcurl, grpc-go's health
// client and Kubernetes' gRPC probes aimed at the API port learn whether
// the edge can serve: SERVING when every readiness check of the admin
// listener's /readyz passes (edge/admin.NotReady), NOT_SERVING otherwise.
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
	"slices"
	"sync"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/edge/admin"
)

// MaxMessageBytes bounds one health request message: it names a service,
// a few dozen bytes.
const MaxMessageBytes = 4 << 10

// Reuse is how long one run of the checks answers every health call: a
// probe needs no fresher answer, and calls without a token must not turn
// into as many calls to the issuer and Redis.
const Reuse = time.Second

// Options are what the health service needs.
type Options struct {
	// Checks decide readiness, as they decide /readyz.
	Checks []admin.Check
	// MaxBytes bounds one request message (requests.max_body_bytes), at
	// most MaxMessageBytes.
	MaxBytes int64
}

// New returns the handler of the health service's procedures: Check,
// for the whole edge (service "") or one of the API's services, which the
// edge serves or not as a whole; Watch answers unimplemented, as gRPC's
// health schema allows (clients fall back to Check).
func New(o Options) http.Handler {
	c := &checker{checks: o.Checks}
	for _, p := range config.Procedures() {
		if !slices.Contains(c.services, p.Service) {
			c.services = append(c.services, p.Service)
		}
	}
	_, h := grpchealth.NewHandler(c, connect.WithReadMaxBytes(int(min(o.MaxBytes, MaxMessageBytes))))
	return h
}

// checker runs the checks at most once per Reuse, whoever asks.
type checker struct {
	checks   []admin.Check
	services []string

	mu     sync.Mutex
	ranAt  time.Time
	status grpchealth.Status
}

func (c *checker) Check(ctx context.Context, req *grpchealth.CheckRequest) (*grpchealth.CheckResponse, error) {
	if req.Service != "" && !slices.Contains(c.services, req.Service) {
		return nil, connect.NewError(connect.CodeNotFound, errors.New("unknown service "+req.Service))
	}
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
	return &grpchealth.CheckResponse{Status: c.status}, nil
}
