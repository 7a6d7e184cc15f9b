package observe

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/orgedge/edge/edge/call"
	"github.com/orgedge/edge/edge/wire"
	"github.com/orgedge/edge/internal/telemetry"
)

// Span names and attributes of the edge. Values are bounded and name no
// caller: never a token, a subject or an organization.
const (
	spanUnknown      = "edge.unknown" // a call the edge could not classify
	SpanAuthenticate = "edge.authenticate"
	SpanLimits       = "edge.limits"
	SpanIdempotency  = "edge.idempotency"
	spanUpstream     = "edge.upstream"

	attrRPCSystem       = attribute.Key("rpc.system")  // connect_rpc or grpc
	attrRPCService      = attribute.Key("rpc.service") // svc.v1.OrganizationService
	attrRPCMethod       = attribute.Key("rpc.method")  // GetOrganization
	attrStatusCode      = attribute.Key("rpc.response.status_code")
	attrGRPCStatus      = attribute.Key("rpc.grpc.status_code")
	attrHTTPStatus      = attribute.Key("http.response.status_code")
	attrProtocol        = attribute.Key("edge.protocol") // connect, grpc, grpcweb, http: as the metrics' label
	AttrAuthOutcome     = attribute.Key("edge.auth.outcome")
	AttrAuthReason      = attribute.Key("edge.auth.reason")
	AttrIdemOutcome     = attribute.Key("edge.idempotency.outcome")
	attrServerAddress   = attribute.Key("server.address")
	instrumentationName = "github.com/orgedge/edge/edge"
)

// Tracing starts the edge's spans. With a no-op tracer provider (tracing
// off) it starts none: the calls' contexts carry no span, and the client's
// trace context reaches the backend as the client sent it, in its headers.
type Tracing struct {
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
	off    bool
}

func NewTracing(tp trace.TracerProvider) Tracing {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	_, off := tp.(noop.TracerProvider)
	return Tracing{tracer: tp.Tracer(instrumentationName), prop: telemetry.Propagator(), off: off}
}

// noSpan is what the span functions return when tracing is off.
var noSpan = trace.SpanFromContext(context.Background())

// StartServer starts the span of one call, a child of the trace context the
// client sent, if any. It is named after the procedure.
func (t Tracing) StartServer(r *http.Request, c wire.Call) (context.Context, trace.Span) {
	if t.off {
		return r.Context(), noSpan
	}
	ctx := t.prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	name := spanUnknown
	if c.Procedure != "" {
		name = strings.TrimPrefix(c.Procedure, "/")
	}
	ctx, span := t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer))
	if span.IsRecording() {
		attrs := []attribute.KeyValue{attrRPCSystem.String(rpcSystem(c.Protocol))}
		if c.Protocol != "" {
			attrs = append(attrs, attrProtocol.String(string(c.Protocol)))
		}
		if c.Procedure != "" {
			attrs = append(attrs, attrRPCService.String(c.Service), attrRPCMethod.String(c.Method))
		}
		span.SetAttributes(attrs...)
	}
	return ctx, span
}

// EndServer records the call's result on its span. The span stays open:
// the caller ends it.
func EndServer(span trace.Span, c wire.Call, code string, status int) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attrStatusCode.String(strings.ToUpper(code)), attrHTTPStatus.Int(status))
	if c.Protocol == wire.GRPC || c.Protocol == wire.GRPCWeb {
		n, ok := grpcCodeIndex[code]
		if !ok {
			n = 2 // unknown
		}
		span.SetAttributes(attrGRPCStatus.Int(n))
	}
	if call.ServerFault(code) {
		span.SetStatus(codes.Error, code)
	}
}

// Start starts an internal span, a step of the chain.
func (t Tracing) Start(ctx context.Context, name string) (context.Context, trace.Span) {
	if t.off {
		return ctx, noSpan
	}
	return t.tracer.Start(ctx, name)
}

// StartUpstream starts the span of c's call to the backend at host (the
// edge.upstream span, a client span).
func (t Tracing) StartUpstream(ctx context.Context, c wire.Call, host string) (context.Context, trace.Span) {
	if t.off {
		return ctx, noSpan
	}
	ctx, span := t.tracer.Start(ctx, spanUpstream, trace.WithSpanKind(trace.SpanKindClient))
	if span.IsRecording() {
		span.SetAttributes(attrRPCSystem.String(rpcSystem(c.Protocol)), attrRPCService.String(c.Service),
			attrRPCMethod.String(c.Method), attrServerAddress.String(host))
	}
	return ctx, span
}

// Inject writes the trace context of ctx into h, for the backend: its
// spans become children of the span of ctx.
func (t Tracing) Inject(ctx context.Context, h http.Header) {
	t.prop.Inject(ctx, propagation.HeaderCarrier(h))
}

// UpstreamFailed notes on the upstream span that the backend could not be
// reached.
func UpstreamFailed(span trace.Span, err error) {
	if span.IsRecording() {
		span.SetStatus(codes.Error, "backend unreachable")
		span.RecordError(err)
	}
}

// UpstreamAnswered notes the backend's answer on the upstream span: its
// HTTP status, its gRPC status (read by now from the trailers, or from the
// headers of a trailers-only answer), and an error status when the
// backend failed or the answer was cut short.
func UpstreamAnswered(span trace.Span, res *http.Response, cut bool) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attrHTTPStatus.Int(res.StatusCode))
	status := wire.FirstValue(res.Trailer["Grpc-Status"])
	if status == "" {
		status = wire.FirstValue(res.Header["Grpc-Status"])
	}
	if n, err := strconv.Atoi(status); err == nil {
		span.SetAttributes(attrGRPCStatus.Int(n))
		if name := codeName(n); call.ServerFault(name) {
			span.SetStatus(codes.Error, name)
		}
	}
	switch {
	case res.StatusCode >= 500:
		span.SetStatus(codes.Error, http.StatusText(res.StatusCode))
	case cut:
		span.SetStatus(codes.Error, "answer cut short")
	}
}

// rpcSystem is the semantic conventions' rpc.system of a protocol.
func rpcSystem(p wire.Protocol) string {
	switch p {
	case wire.GRPC, wire.GRPCWeb:
		return "grpc"
	case wire.Connect, wire.HTTP:
		return "connect_rpc"
	}
	return "unknown"
}
