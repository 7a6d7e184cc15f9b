// Package telemetry sets up OpenTelemetry tracing for the edge and the
// backend from the standard OTEL_* environment variables, and names the one
// way both carry trace context: W3C traceparent/tracestate and baggage.
//
// Tracing is off unless the environment asks for an exporter: then the
// tracer provider is OpenTelemetry's no-op one, nothing is exported and
// nothing is sampled. It is on when OTEL_TRACES_EXPORTER names an exporter
// ("otlp", or "console" to print spans on stdout), or when
// OTEL_TRACES_EXPORTER is unset and OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set. OTEL_SDK_DISABLED=true and
// OTEL_TRACES_EXPORTER=none turn it off whatever else is set.
//
// When on, the exporter is the one OpenTelemetry's autoexport makes from
// the same variables: OTLP to the collector that the OTEL_EXPORTER_OTLP_*
// variables name (endpoint, headers, timeout, certificates, compression),
// in the protocol of OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or
// OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf" (the default) or "grpc".
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES override the resource,
// OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG the sampler (default:
// parentbased_always_on), and OTEL_BSP_* the batching.
//
// It is not a metrics or logging setup: metrics are Prometheus, on each
// process's admin listener; logs are log/slog.
package telemetry

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Propagator is how the edge and the backend read and write trace context:
// W3C Trace Context (traceparent, tracestate) and W3C Baggage. Extracting
// validates what it reads; a malformed traceparent is ignored.
func Propagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

// Enabled reports whether the environment (read through getenv) asks for
// traces to be exported, or why its settings are wrong.
func Enabled(getenv func(string) string) (bool, error) {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false, nil
	}
	switch e := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER"))); e {
	case "none":
		return false, nil
	case "otlp", "console":
		return true, nil
	case "":
		return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "", nil
	default:
		return false, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: want otlp, console or none", e)
	}
}

// NewTracerProvider returns the tracer provider the environment asks for,
// for a process that calls itself serviceName (unless OTEL_SERVICE_NAME
// says otherwise), and the function that flushes and stops it. When tracing
// is off it returns a no-op provider and a shutdown that does nothing. It
// does not contact the collector: export errors are reported later, through
// OpenTelemetry's error handler.
func NewTracerProvider(ctx context.Context, serviceName, version string) (trace.TracerProvider, func(context.Context) error, error) {
	nothing := func(context.Context) error { return nil }
	on, err := Enabled(os.Getenv)
	if err != nil || !on {
		return noop.NewTracerProvider(), nothing, err
	}
	exporter, err := newExporter(ctx)
	if err != nil {
		return noop.NewTracerProvider(), nothing, err
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(
			attribute.String("service.name", serviceName),
			attribute.String("service.version", version),
		),
		resource.WithTelemetrySDK(),
		resource.WithHost(),
		resource.WithFromEnv(), // last: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
	)
	if err != nil && res == nil {
		_ = exporter.Shutdown(ctx)
		return noop.NewTracerProvider(), nothing, fmt.Errorf("telemetry: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	return tp, tp.Shutdown, nil
}

// newExporter is the exporter the OTEL_* variables ask for, made by
// autoexport; its fallback when OTEL_TRACES_EXPORTER is unset is OTLP,
// which is what an endpoint alone asks for.
func newExporter(ctx context.Context) (sdktrace.SpanExporter, error) {
	exp, err := autoexport.NewSpanExporter(ctx)
	if err != nil {
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	return exp, nil
}

// Setup makes the provider NewTracerProvider returns the process's global
// one, and returns it too, for the code that takes its provider explicitly;
// it sets the global propagator to [Propagator], and sends OpenTelemetry's
// own errors (a collector out of reach) to slog.Default at warn level. Call
// shutdown before exiting, to flush spans still in memory.
func Setup(ctx context.Context, serviceName, version string) (tp trace.TracerProvider, shutdown func(context.Context) error, err error) {
	tp, shutdown, err = NewTracerProvider(ctx, serviceName, version)
	if err != nil {
		return tp, shutdown, err
	}
	otel.SetTextMapPropagator(Propagator())
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		slog.Default().Warn("opentelemetry", "err", err)
	}))
	// Off, the no-op provider too becomes the global one: code that takes
	// the global provider can then tell that nothing is traced (the edge
	// skips its spans altogether), where the delegating placeholder would
	// make an object per span all the same.
	otel.SetTracerProvider(tp)
	return tp, shutdown, nil
}
