// Package reflection answers gRPC server reflection (grpc.reflection.v1
// and v1alpha) at the edge, from the API's compiled descriptors (gen/),
// so that grpcurl and buf curl need no schema of their own. A reflection
// call is authenticated like any call, with the same authenticator (its
// cache and its per-address bound on failures), and refused in the
// caller's protocol; any valid token may read the schema, which is the
// API's published contract. It is not charged to any plan: it reads
// nothing but memory, and each stream is bounded in time.
//
// It is not the backend's reflection: the edge never forwards these calls.
package reflection

import (
	"context"
	"net/http"
	"slices"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpcreflect"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/edge/apierror"
	"github.com/orgedge/edge/edge/authn"
)

// Procedures are the two reflection procedures the edge answers.
var Procedures = []string{
	"/" + grpcreflect.ReflectV1ServiceName + "/ServerReflectionInfo",
	"/" + grpcreflect.ReflectV1AlphaServiceName + "/ServerReflectionInfo",
}

// Options are what reflection needs.
type Options struct {
	// Auth authenticates every reflection call.
	Auth *authn.Authenticator
	// Timeout bounds one reflection stream (requests.max_unary_timeout):
	// a client asks its few questions at once.
	Timeout time.Duration
	// MaxBytes bounds one request message (requests.max_body_bytes).
	MaxBytes int64
}

// Step answers reflection calls.
type Step struct {
	o   Options
	mux *http.ServeMux
}

// New returns the step, reflecting every service of the API.
func New(o Options) *Step {
	var services []string
	for _, p := range config.Procedures() {
		if !slices.Contains(services, p.Service) {
			services = append(services, p.Service)
		}
	}
	slices.Sort(services)
	r := grpcreflect.NewStaticReflector(services...)
	mux := http.NewServeMux()
	opt := connect.WithReadMaxBytes(int(o.MaxBytes))
	mux.Handle(grpcreflect.NewHandlerV1(r, opt))
	mux.Handle(grpcreflect.NewHandlerV1Alpha(r, opt))
	return &Step{o: o, mux: mux}
}

// Wrap returns next behind the step: reflection calls are answered here,
// every other call goes to next.
func (s *Step) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !slices.Contains(Procedures, r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		if _, err := s.o.Auth.AuthenticateRequest(r.Context(), r); err != nil {
			apierror.Write(w, r, authn.Refusal(err, false))
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), s.o.Timeout)
		defer cancel()
		s.mux.ServeHTTP(w, r.WithContext(ctx))
	})
}
