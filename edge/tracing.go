package edge

import (
	"context"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/orgedge/edge/edge/classify"
	"github.com/orgedge/edge/internal/telemetry"
)

// Span names and attributes of the edge. Values are bounded and name no
// caller: never a token, a subject or an organization.
const (
	spanUnknown      = "edge.unknown" // a call the edge could not classify
	spanAuthenticate = "edge.authenticate"
	spanLimits       = "edge.limits"
	spanIdempotency  = "edge.idempotency"
	spanUpstream     = "edge.upstream"

	attrRPCSystem       = attribute.Key("rpc.system")  // connect_rpc or grpc
	attrRPCService      = attribute.Key("rpc.service") // svc.v1.OrganizationService
	attrRPCMethod       = attribute.Key("rpc.method")  // GetOrganization
	attrStatusCode      = attribute.Key("rpc.response.status_code")
	attrGRPCStatus      = attribute.Key("rpc.grpc.status_code")
	attrHTTPStatus      = attribute.Key("http.response.status_code")
	attrProtocol        = attribute.Key("edge.protocol") // connect, grpc, grpcweb, http: as the metrics' label
	attrAuthOutcome     = attribute.Key("edge.auth.outcome")
	attrAuthReason      = attribute.Key("edge.auth.reason")
	attrIdemOutcome     = attribute.Key("edge.idempotency.outcome")
	attrServerAddress   = attribute.Key("server.address")
	instrumentationName = "github.com/orgedge/edge/edge"
)

// tracing starts the edge's spans. With a no-op tracer provider (tracing
// off) it starts none: the calls' contexts carry no span, and the client's
// trace context reaches the backend as the client sent it, in its headers.
type tracing struct {
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
	off    bool
}

func newTracing(tp trace.TracerProvider) tracing {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	_, off := tp.(noop.TracerProvider)
	return tracing{tracer: tp.Tracer(instrumentationName), prop: telemetry.Propagator(), off: off}
}

// noSpan is what the span functions return when tracing is off.
var noSpan = trace.SpanFromContext(context.Background())

// startServer starts the span of one call, a child of the trace context the
// client sent, if any. It is named after the procedure.
func (t tracing) startServer(r *http.Request, c classify.Call) (context.Context, trace.Span) {
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

// endServer records the call's result on its span. The span stays open:
// the caller ends it.
func endServer(span trace.Span, c classify.Call, code string, status int) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attrStatusCode.String(strings.ToUpper(code)), attrHTTPStatus.Int(status))
	if c.Protocol == classify.GRPC || c.Protocol == classify.GRPCWeb {
		span.SetAttributes(attrGRPCStatus.Int(grpcCodeNumber(code)))
	}
	if serverFault(code) {
		span.SetStatus(codes.Error, code)
	}
}

// start starts an internal span, a step of the chain.
func (t tracing) start(ctx context.Context, name string) (context.Context, trace.Span) {
	if t.off {
		return ctx, noSpan
	}
	return t.tracer.Start(ctx, name)
}

// startClient starts the span of the call to the backend.
func (t tracing) startClient(ctx context.Context) (context.Context, trace.Span) {
	if t.off {
		return ctx, noSpan
	}
	return t.tracer.Start(ctx, spanUpstream, trace.WithSpanKind(trace.SpanKindClient))
}

// rpcSystem is the semantic conventions' rpc.system of a protocol.
func rpcSystem(p classify.Protocol) string {
	switch p {
	case classify.GRPC, classify.GRPCWeb:
		return "grpc"
	case classify.Connect, classify.HTTP:
		return "connect_rpc"
	}
	return "unknown"
}

// serverFault reports whether a code says the server failed, rather than
// the caller: such spans get the error status (OpenTelemetry's RPC server
// conventions).
func serverFault(code string) bool {
	switch code {
	case "unknown", "deadline_exceeded", "unimplemented", "internal", "unavailable", "data_loss":
		return true
	}
	return false
}

func grpcCodeNumber(code string) int {
	for i, name := range grpcCodes {
		if name == code {
			return i
		}
	}
	return 2 // unknown
}
