// Package orgsvc is the backend behind the edge: OrganizationService on SQL
// storage, with minimal but honest EnvironmentService and BlueprintService,
// served over Connect, gRPC, gRPC-Web and HTTP/JSON by connect-go.
//
// It verifies every caller's bearer token itself and never trusts identity
// headers. It does not rate-limit, meter or replay: that is the edge's job.
package orgsvc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
	"connectrpc.com/otelconnect"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/orgedge/edge/gen/svc/v1/svcv1connect"
	"github.com/orgedge/edge/internal/telemetry"
	"github.com/orgedge/edge/orgsvc/catalog"
	"github.com/orgedge/edge/orgsvc/store"
)

// Config configures a Service.
type Config struct {
	Store store.Store   // required
	Auth  Authenticator // required
	// InvitationTTL is how long an invitation stays pending. Default 7 days.
	InvitationTTL time.Duration
	// ProvisionDelay is how long a new environment stays PROVISIONING before
	// it is RUNNING. Default 2s.
	ProvisionDelay time.Duration
	// WatchPoll is how often a WatchEnvironment stream re-reads storage, to
	// see changes made by other replicas. Default 2s.
	WatchPoll time.Duration
	// WatchAccessCheck is how often a WatchEnvironment stream checks again
	// that its caller may still see the environment's organization; a caller
	// who lost access (removed, suspended) gets permission_denied within
	// this bound. Default 30s.
	WatchAccessCheck time.Duration
	// MaxRequestBytes bounds a request message. Default 4 MiB.
	MaxRequestBytes int
	// BodyTimeout bounds how long a call's whole request body may take to
	// arrive, from its headers; past it the call ends with
	// deadline_exceeded (REQUEST_BODY_TIMEOUT). Default 10s.
	BodyTimeout time.Duration
	Now         func() time.Time // default time.Now
	Logger      *slog.Logger     // default slog.Default()
	// TracerProvider makes the spans of handlers (through otelconnect, as
	// children of the caller's trace context: the edge's upstream span) and
	// of storage calls (store.<Method>). Default: the global provider
	// (otel.GetTracerProvider), a no-op unless the process set one up.
	TracerProvider trace.TracerProvider
	// DBSystem is the db.system of storage spans: DBSystemSQLite or
	// DBSystemPostgreSQL (see DBSystem). Default "other_sql".
	DBSystem string
	// Metrics, when set, counts calls and times them and storage calls.
	Metrics *Metrics
}

// Service implements the API's backend services.
type Service struct {
	store    store.Store
	auth     Authenticator
	otel     *otelconnect.Interceptor
	metrics  *Metrics
	catalog  *catalog.Catalog
	watchers *hub
	activity activity
	log      *slog.Logger
	now      func() time.Time

	invitationTTL  time.Duration
	provisionDelay time.Duration
	watchPoll      time.Duration
	watchAccess    time.Duration
	maxBytes       int
	bodyTimeout    time.Duration
}

// New returns a Service.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil || cfg.Auth == nil {
		return nil, errors.New("orgsvc: Store and Auth are required")
	}
	tp := cfg.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	// The edge in front is the backend's only caller, so its trace context
	// is trusted: handler spans are its upstream span's children.
	oi, err := otelconnect.NewInterceptor(otelconnect.WithTracerProvider(tp), otelconnect.WithPropagator(telemetry.Propagator()),
		otelconnect.WithTrustRemote(), otelconnect.WithoutMetrics())
	if err != nil {
		return nil, fmt.Errorf("orgsvc: tracing: %w", err)
	}
	s := &Service{
		store:          newTracedStore(cfg.Store, tp, cfg.DBSystem, cfg.Metrics),
		otel:           oi,
		metrics:        cfg.Metrics,
		auth:           cfg.Auth,
		catalog:        catalog.Builtin(),
		watchers:       newHub(),
		log:            cfg.Logger,
		now:            cfg.Now,
		invitationTTL:  cfg.InvitationTTL,
		provisionDelay: cfg.ProvisionDelay,
		watchPoll:      cfg.WatchPoll,
		watchAccess:    cfg.WatchAccessCheck,
		maxBytes:       cfg.MaxRequestBytes,
		bodyTimeout:    cfg.BodyTimeout,
	}
	if s.bodyTimeout <= 0 {
		s.bodyTimeout = DefaultBodyTimeout
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.invitationTTL <= 0 {
		s.invitationTTL = 7 * 24 * time.Hour
	}
	if s.provisionDelay < 0 {
		return nil, errors.New("orgsvc: ProvisionDelay must not be negative")
	}
	if s.provisionDelay == 0 {
		s.provisionDelay = 2 * time.Second
	}
	if s.watchPoll <= 0 {
		s.watchPoll = 2 * time.Second
	}
	if s.watchAccess <= 0 {
		s.watchAccess = 30 * time.Second
	}
	if s.maxBytes <= 0 {
		s.maxBytes = 4 << 20
	}
	return s, nil
}

// Handler serves every service of the API, gRPC health checking and gRPC
// server reflection.
func (s *Service) Handler() http.Handler {
	opts := []connect.HandlerOption{
		// Outermost first: the span and the metrics see the final error.
		connect.WithInterceptors(s.otel, metricsInterceptor{s.metrics}, interceptor{s}),
		connect.WithReadMaxBytes(s.maxBytes),
	}
	mux := http.NewServeMux()
	mux.Handle(svcv1connect.NewOrganizationServiceHandler(organizations{s}, opts...))
	mux.Handle(svcv1connect.NewEnvironmentServiceHandler(environments{s}, opts...))
	mux.Handle(svcv1connect.NewBlueprintServiceHandler(blueprints{s}, opts...))

	names := []string{
		svcv1connect.OrganizationServiceName,
		svcv1connect.EnvironmentServiceName,
		svcv1connect.BlueprintServiceName,
	}
	mux.Handle(grpchealth.NewHandler(healthChecker{s.store, names}))
	reflector := grpcreflect.NewStaticReflector(names...)
	mux.Handle(grpcreflect.NewHandlerV1(reflector))
	mux.Handle(grpcreflect.NewHandlerV1Alpha(reflector))
	return boundBodies(mux, s.bodyTimeout)
}

// DefaultBodyTimeout is Config.BodyTimeout's default: a few seconds more
// than the edge's own (requests.body_timeout), so that behind the edge the
// edge ends a slow body first and answers it.
const DefaultBodyTimeout = 15 * time.Second

// Ready reports whether storage answers and tokens can be verified (the
// identity provider's discovery and keys are in): a backend that would
// refuse every caller with "identity provider unreachable" is not ready.
func (s *Service) Ready(ctx context.Context) error {
	if err := s.store.Ping(ctx); err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	if err := s.auth.Ready(ctx); err != nil {
		return fmt.Errorf("identity provider: %w", err)
	}
	return nil
}

// healthChecker reports SERVING while storage answers.
type healthChecker struct {
	store store.Store
	names []string
}

func (h healthChecker) Check(ctx context.Context, req *grpchealth.CheckRequest) (*grpchealth.CheckResponse, error) {
	known := req.Service == ""
	for _, n := range h.names {
		known = known || n == req.Service
	}
	if !known {
		return nil, connect.NewError(connect.CodeNotFound, errors.New("unknown service "+req.Service))
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := h.store.Ping(ctx); err != nil {
		return &grpchealth.CheckResponse{Status: grpchealth.StatusNotServing}, nil
	}
	return &grpchealth.CheckResponse{Status: grpchealth.StatusServing}, nil
}
