// Package reflection answers gRPC server reflection (grpc.reflection.v1
// and v1alpha) at the edge, from the API's compiled descriptors (gen/),
// so that grpcurl and buf curl need no schema of their own. Any valid
// token may read the schema, which is the API's published contract.
//
// It is only the answer: the chain brings a reflection call here after
// every step any call goes through (classification, the body's bounds,
// authentication, the subject's stream cap and plan rate, the calls in
// flight, the access line and the metrics), in place of the backend. The
// edge never forwards these calls.
package reflection

import (
	"context"
	"net/http"
	"slices"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpcreflect"

	"github.com/orgedge/edge/config"
)

// MaxMessageBytes bounds one reflection request message: a request names a
// symbol or a file, never more than a few hundred bytes. A client that
// declares a larger message is refused before any of it is read.
const MaxMessageBytes = 16 << 10

// Options are what reflection needs.
type Options struct {
	// Timeout bounds one reflection stream (requests.max_unary_timeout):
	// a client asks its few questions at once.
	Timeout time.Duration
	// MaxBytes bounds one request message (requests.max_body_bytes), at
	// most MaxMessageBytes.
	MaxBytes int64
}

// Handler answers reflection calls.
type Handler struct {
	o   Options
	mux *http.ServeMux
}

// New returns the handler, reflecting every service of the API.
func New(o Options) *Handler {
	var services []string
	for _, p := range config.Procedures() {
		if !slices.Contains(services, p.Service) {
			services = append(services, p.Service)
		}
	}
	slices.Sort(services)
	r := grpcreflect.NewStaticReflector(services...)
	mux := http.NewServeMux()
	opt := connect.WithReadMaxBytes(int(min(o.MaxBytes, MaxMessageBytes)))
	mux.Handle(grpcreflect.NewHandlerV1(r, opt))
	mux.Handle(grpcreflect.NewHandlerV1Alpha(r, opt))
	return &Handler{o: o, mux: mux}
}

// ServeHTTP answers one reflection call, within Options.Timeout.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), h.o.Timeout)
	defer cancel()
	h.mux.ServeHTTP(w, r.WithContext(ctx))
}
