package telemetry

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

func TestTracingIsOffUnlessTheEnvironmentNamesAnExporter(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		on   bool
		bad  bool
	}{
		{name: "nothing set", env: nil},
		{name: "an endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, on: true},
		{name: "a traces endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, on: true},
		{name: "otlp to the default endpoint", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, on: true},
		{name: "console", env: map[string]string{"OTEL_TRACES_EXPORTER": "console"}, on: true},
		{name: "none wins over an endpoint", env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}},
		{name: "the SDK disabled", env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}},
		{name: "an exporter this build lacks", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			on, err := Enabled(func(k string) string { return tc.env[k] })
			if on != tc.on || (err != nil) != tc.bad {
				t.Fatalf("Enabled = %v, %v; want %v, error %v", on, err, tc.on, tc.bad)
			}
		})
	}
}

func TestWithoutOTELVariablesTheProviderIsNoOp(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	t.Setenv("OTEL_TRACES_EXPORTER", "")
	tp, shutdown, err := NewTracerProvider(context.Background(), "test", "v0")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tp.(noop.TracerProvider); !ok {
		t.Fatalf("provider %T, want the no-op one", tp)
	}
	_, span := tp.Tracer("t").Start(context.Background(), "s")
	if span.IsRecording() {
		t.Error("a no-op provider records")
	}
	if err := shutdown(context.Background()); err != nil {
		t.Error(err)
	}
}

func TestSpansGoOverOTLPHTTPToTheConfiguredEndpoint(t *testing.T) {
	got := make(chan *collectortrace.ExportTraceServiceRequest, 1)
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req := new(collectortrace.ExportTraceServiceRequest)
		if r.URL.Path != "/v1/traces" || proto.Unmarshal(body, req) != nil {
			http.Error(w, "not an OTLP trace export", http.StatusBadRequest)
			return
		}
		select {
		case got <- req:
		default:
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		_, _ = w.Write(out)
	}))
	defer collector.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	t.Setenv("OTEL_SERVICE_NAME", "renamed")

	tp, shutdown, err := NewTracerProvider(context.Background(), "edge", "v1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	// A child of a caller's context, read as the edge reads it.
	h := http.Header{"Traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}
	ctx := Propagator().Extract(context.Background(), propagation.HeaderCarrier(h))
	_, span := tp.Tracer("t").Start(ctx, "exported", trace.WithSpanKind(trace.SpanKindServer))
	span.End()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	var req *collectortrace.ExportTraceServiceRequest
	select {
	case req = <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("the collector got no spans")
	}
	rs := req.ResourceSpans[0]
	attrs := map[string]string{}
	for _, kv := range rs.Resource.Attributes {
		attrs[kv.Key] = kv.Value.GetStringValue()
	}
	if attrs["service.name"] != "renamed" || attrs["service.version"] != "v1.2.3" {
		t.Errorf("resource %v: want service.name from OTEL_SERVICE_NAME and the version", attrs)
	}
	sp := rs.ScopeSpans[0].Spans[0]
	if sp.Name != "exported" || trace.TraceID(sp.TraceId).String() != "4bf92f3577b34da6a3ce929d0e0e4736" || trace.SpanID(sp.ParentSpanId).String() != "00f067aa0ba902b7" {
		t.Errorf("span %s in trace %x, parent %x", sp.Name, sp.TraceId, sp.ParentSpanId)
	}
}

func TestAnUnknownOTLPProtocolIsAnError(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
	if _, _, err := NewTracerProvider(context.Background(), "edge", "v"); err == nil {
		t.Fatal("http/json accepted")
	}
}
